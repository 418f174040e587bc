"""A Secrets Manager secret changed by read, change, compare-and-swap: no writer's change is lost.

PutSecretValue alone moves AWSCURRENT to the new version whatever happened
since it was read, so of two operators changing keys at once the second would
silently undo the first. Instead the new version is put under AWSPENDING (which
leaves AWSCURRENT where it is), and AWSCURRENT is moved to it with
UpdateSecretVersionStage naming the version that was read as
`RemoveFromVersionId`: Secrets Manager refuses the move when the label is no
longer on that version. Then the change is applied again to the newer version,
up to ATTEMPTS times. A version that lost stays behind without AWSCURRENT,
never read by a gateway; Secrets Manager deletes such versions in time.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..aws_reads import SECRET_CURRENT_STAGE
from .operator_errors import OperatorError

PENDING_STAGE = "AWSPENDING"
ATTEMPTS = 5
# Between attempts, so that writers that collided do not collide again in step.
BACKOFF_SECONDS = 0.2


@dataclass(frozen=True)
class SecretVersion:
    text: str
    version_id: str


def read_current(client: Any, secret_id: str) -> SecretVersion:
    answer = client.get_secret_value(SecretId=secret_id, VersionStage=SECRET_CURRENT_STAGE)
    return SecretVersion(answer["SecretString"], answer["VersionId"])


def swap(client: Any, secret_id: str, read: SecretVersion, text: str) -> str | None:
    """Make `text` the secret's value if `read` is still its current version: the new
    version id, or None when another writer came first (nothing of ours is in force)."""
    token = str(uuid.uuid4())
    client.put_secret_value(
        SecretId=secret_id,
        SecretString=text,
        ClientRequestToken=token,
        VersionStages=[PENDING_STAGE],
    )
    try:
        client.update_secret_version_stage(
            SecretId=secret_id,
            VersionStage=SECRET_CURRENT_STAGE,
            MoveToVersionId=token,
            RemoveFromVersionId=read.version_id,
        )
    except client.exceptions.InvalidParameterException:
        # Refused for another reason if the version read is still current.
        if read_current(client, secret_id).version_id == read.version_id:
            raise
        return None
    return token


def update(
    client: Any,
    secret_id: str,
    change: Callable[[str], str],
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Apply `change` to the secret's current value and make the result current; the new
    version id. `change` may run more than once, each time on a newer value."""
    for _ in range(ATTEMPTS):
        read = read_current(client, secret_id)
        version = swap(client, secret_id, read, change(read.text))
        if version is not None:
            return version
        sleep(random.uniform(0, BACKOFF_SECONDS))
    raise OperatorError(
        f"secret {secret_id} changed under every one of {ATTEMPTS} attempts; nothing written",
        "another operator is changing it: try again",
    )
