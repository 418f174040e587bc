"""Where records live: an S3 bucket or a folder, behind one small interface.

The gateway only puts (its role may do nothing else in the bucket); listing,
reading and deleting are the operator's, from `policy-gateway history`, with
the operator's own credentials. RECORDS_BUCKET names the bucket (the
template's; AWS_ENDPOINT_URL_S3 points boto3 at a stand-in); else
RECORDS_DIR names a folder (`make run` sets one in its working directory);
when both are set the bucket wins, as a chain parameter wins over an inline
chain. boto3 is imported on the first write, off the cold path.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

# DeleteObjects takes at most this many keys per request.
_DELETE_BATCH = 1000


@dataclass(frozen=True)
class StoredObject:
    key: str
    modified: float
    """When it was written, epoch seconds."""
    size: int


class RecordStore(Protocol):
    """What the writer and the viewer need of a store."""

    @property
    def location(self) -> str:
        """Where the records are, for people: `s3://bucket` or a folder's path."""
        ...

    def put(self, key: str, body: bytes) -> None: ...

    def list(self, prefix: str = "") -> Iterator[StoredObject]: ...

    def get(self, key: str) -> bytes: ...

    def delete(self, keys: Sequence[str]) -> None: ...

    def reset(self) -> None:
        """Forget any client (after a SnapStart restore: its credentials are the snapshot's)."""
        ...


class FolderStore:
    """Records as files under a folder, one per key; a write is atomic (a rename)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    @property
    def location(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):
            raise ValueError(f"record key outside the store: {key!r}")
        return path

    def put(self, key: str, body: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Readable by the folder's owner only: a record is a conversation.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".put-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(body)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.rglob("*")):
            if not path.is_file() or path.name.startswith(".put-"):
                continue
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix):
                stat = path.stat()
                yield StoredObject(key, stat.st_mtime, stat.st_size)

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def reset(self) -> None:
        """Nothing to forget: a folder has no client."""


class S3Store:
    """Records as objects of one bucket (encrypted at rest by the bucket's default key)."""

    def __init__(self, bucket: str, client: Any = None) -> None:
        self.bucket = bucket
        self._client = client
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                from ..aws_reads import aws_client

                self._client = aws_client("s3")
            return self._client

    def reset(self) -> None:
        with self._lock:
            self._client = None

    def put(self, key: str, body: bytes) -> None:
        self.client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType="application/json"
        )

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        for page in pages:
            for item in page.get("Contents", ()):
                modified: datetime = item["LastModified"]
                yield StoredObject(
                    item["Key"], modified.astimezone(UTC).timestamp(), int(item["Size"])
                )

    def get(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def delete(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
            )


def open_store(bucket: str | None, folder: str | None, client: Any = None) -> RecordStore | None:
    """The store configured (Settings.records_bucket wins over records_dir), else None."""
    if bucket:
        return S3Store(bucket, client)
    if folder:
        return FolderStore(folder)
    return None
