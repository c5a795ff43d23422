"""Bootstrap tokens: their form, expiry and groups as upstream's cluster-bootstrap reads
them, and the detached JWS checked against cluster-bootstrap's own test vectors."""

from __future__ import annotations

from kubeling import bootstraptoken as bt

CONTENT = "Hello from the other side. I must have called a thousand times."


def test_detached_signatures_match_cluster_bootstraps_vectors() -> None:
    # k8s.io/cluster-bootstrap/token/jws/jws_test.go
    long = "my voice is my passcode. my voice is my passcode"
    assert bt.detached_signature(CONTENT, "joshua", long) == \
        "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..SFoKn0-YxqnvpSExt4LuCZ_7pvIBdX3SoUO_NsTpkdg"
    assert bt.detached_signature("", "joshua", long) == \
        "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..kzZha466Sbz_vFhUBjjYp2rl3F7yHgdDdUIBGxQg4js"
    assert bt.signature_valid("eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..SFoKn0-YxqnvpSExt4LuCZ_7pvIBdX3SoUO_NsTpkdg",
                              CONTENT, "joshua", long)
    assert not bt.signature_valid(bt.detached_signature(CONTENT, "joshua", long), CONTENT + ".", "joshua", long)


def test_tokens_expiry_and_groups() -> None:
    assert bt.parse("abcdef.0123456789abcdef") == ("abcdef", "0123456789abcdef")
    for bad in ("abcdef.0123456789abcde", "ABCDEF.0123456789abcdef", "abcdef0123456789abcdef", ""):
        assert bt.parse(bad) is None
    assert bt.parse(bt.generate()) is not None
    now = 1_800_000_000.0
    assert not bt.expired({}, now)
    assert bt.expired({"expiration": b"2027-01-15T08:00:00Z"}, now)
    assert not bt.expired({"expiration": b"2027-01-15T08:00:00Z"}, 1_700_000_000.0)
    assert bt.expired({"expiration": b"tomorrow"}, now), "unreadable: expired, as upstream"
    assert bt.groups({}) == [bt.GROUP]
    assert bt.groups({"auth-extra-groups": b"system:bootstrappers:kubeadm:default-node-token"}) == \
        [bt.GROUP, bt.DEFAULT_GROUP]
    assert bt.groups({"auth-extra-groups": b"system:masters"}) is None
