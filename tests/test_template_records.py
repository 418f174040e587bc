"""The records bucket in template.yaml (issue 43): encrypted with the stack's key (or a key
of its own), never public, TLS only, expiring after RecordRetentionDays; the gateway's role
may only put objects in it; RecordFailures has its alarm. cfn-lint's run is test_template's.
"""

from __future__ import annotations

from typing import Any

import pytest
from policy_gateway import names, settings

from .support.cfn import Stack, load_template

pytestmark = pytest.mark.deploy

TEMPLATE = load_template()
KEY = "arn:aws:kms:us-east-1:123456789012:key/abc"


def resources(**parameters: str) -> dict[str, Any]:
    return Stack(TEMPLATE, "gw", parameters=parameters).resources()


def statements(found: dict[str, Any], logical_id: str) -> list[dict[str, Any]]:
    return list(found[logical_id]["Properties"]["PolicyDocument"]["Statement"])


def test_the_bucket_is_encrypted_private_and_expiring() -> None:
    own = resources()["RecordsBucket"]["Properties"]
    (rule,) = own["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert "RecordsKey" in str(rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"])
    with_key = resources(KmsKeyArn=KEY)
    assert "RecordsKey" not in with_key
    (rule,) = with_key["RecordsBucket"]["Properties"]["BucketEncryption"][
        "ServerSideEncryptionConfiguration"
    ]
    assert rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"] == KEY
    assert set(own["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(own["PublicAccessBlockConfiguration"]) == 4
    assert own["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    (expiry,) = own["LifecycleConfiguration"]["Rules"]
    assert str(expiry["ExpirationInDays"]) == "30"
    assert TEMPLATE["Parameters"]["RecordRetentionDays"]["Default"] == 30
    shorter = resources(RecordRetentionDays="7")["RecordsBucket"]["Properties"]
    assert str(shorter["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"]) == "7"


def test_the_bucket_policy_refuses_requests_without_tls_and_public_grants() -> None:
    found = statements(resources(), "RecordsBucketPolicy")
    tls = [s for s in found if s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")]
    (no_tls,) = tls
    assert no_tls["Effect"] == "Deny"
    assert no_tls["Principal"] == "*"
    assert no_tls["Action"] == "s3:*"
    assert no_tls["Condition"]["Bool"]["aws:SecureTransport"] == "false"
    assert len(no_tls["Resource"]) == 2  # the bucket and every object in it
    (public,) = [
        s for s in found if "s3:x-amz-acl" in s.get("Condition", {}).get("StringEquals", {})
    ]
    assert public["Effect"] == "Deny"
    assert public["Principal"] == "*"
    assert {"s3:PutObject", "s3:PutObjectAcl", "s3:PutBucketAcl"} <= set(public["Action"])
    assert {"public-read", "public-read-write", "authenticated-read"} <= set(
        public["Condition"]["StringEquals"]["s3:x-amz-acl"]
    )
    assert not [s for s in found if s["Effect"] == "Allow"]


def test_the_gateway_may_only_put_records() -> None:
    found = resources()
    function = found["GatewayFunction"]["Properties"]
    assert settings.ENV_RECORDS_BUCKET in function["Environment"]["Variables"]
    granted = [s for p in function["Policies"] for s in p.get("Statement", [])]
    on_bucket = [s for s in granted if "s3:" in str(s.get("Action"))]
    assert [s["Action"] for s in on_bucket] == ["s3:PutObject"]
    assert str(on_bucket[0]["Resource"]).endswith("/*")
    on_records_key = [s for s in granted if "RecordsKey" in str(s.get("Resource"))]
    assert [s["Action"] for s in on_records_key] == ["kms:GenerateDataKey"]


def test_record_failures_have_their_alarm() -> None:
    alarm = resources()["RecordFailuresAlarm"]["Properties"]
    assert alarm["Namespace"] == names.METRICS_NAMESPACE
    assert alarm["MetricName"] == names.METRIC_RECORD_FAILURES
    assert alarm["Dimensions"] == [{"Name": names.METRICS_SERVICE_DIMENSION, "Value": "gw"}]
    assert alarm["Threshold"] == 1
