"""Encryption at rest's providers (apiserver.storage.encryption): upstream's byte layouts,
which provider reads what, staleness, and the configuration's rules."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from apiserver.storage.encryption import parse_encryption_config
from kubeling import errors

SECRET = bytes(range(32))


def _config(*providers: dict[str, object], resources: tuple[str, ...] = ("secrets",)) -> dict[str, object]:
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": list(resources), "providers": list(providers)}]}


def _aescbc(name: str, secret: bytes = SECRET) -> dict[str, object]:
    return {"aescbc": {"keys": [{"name": name, "secret": base64.b64encode(secret).decode()}]}}


def test_aescbc_is_upstreams_layout_an_iv_then_padded_cbc() -> None:
    transformer = parse_encryption_config(_config(_aescbc("key1"))).transformer_for("secrets")
    assert transformer is not None
    stored = transformer.to_storage(b"hello", b"/registry/secrets/ns/s")
    prefix = b"k8s:enc:aescbc:v1:key1:"
    assert stored.startswith(prefix) and len(stored) == len(prefix) + 16 + 16
    body = stored[len(prefix):]
    decryptor = Cipher(algorithms.AES(SECRET), modes.CBC(body[:16])).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    assert unpadder.update(decryptor.update(body[16:]) + decryptor.finalize()) + unpadder.finalize() == b"hello"
    assert transformer.from_storage(stored, b"/registry/secrets/ns/s") == (b"hello", False)
    assert transformer.to_storage(b"hello", b"k") != stored  # a fresh IV every time


def test_aesgcm_binds_the_value_to_its_key() -> None:
    config = _config({"aesgcm": {"keys": [{"name": "g", "secret": base64.b64encode(SECRET[:16]).decode()}]}})
    transformer = parse_encryption_config(config).transformer_for("secrets")
    assert transformer is not None
    stored = transformer.to_storage(b"data", b"/registry/secrets/a/one")
    assert transformer.from_storage(stored, b"/registry/secrets/a/one")[0] == b"data"
    with pytest.raises(errors.InternalError, match="cannot be decrypted"):
        transformer.from_storage(stored, b"/registry/secrets/a/other")  # moved to another key


def test_reads_by_prefix_and_staleness() -> None:
    old = parse_encryption_config(_config(_aescbc("old", bytes(32)), {"identity": {}})).transformer_for("secrets")
    new = parse_encryption_config(_config(_aescbc("new"), _aescbc("old", bytes(32)), {"identity": {}}))
    rotated = new.transformer_for("secrets")
    assert old is not None and rotated is not None
    written_old = old.to_storage(b"v", b"k")
    assert rotated.from_storage(written_old, b"k") == (b"v", True)  # an old key: to be written again
    assert rotated.from_storage(b"plain", b"k") == (b"plain", True)  # identity reads plaintext, stale too
    assert rotated.from_storage(rotated.to_storage(b"v", b"k"), b"k") == (b"v", False)
    only_new = parse_encryption_config(_config(_aescbc("new"))).transformer_for("secrets")
    assert only_new is not None
    with pytest.raises(errors.InternalError, match="no matching prefix found"):
        only_new.from_storage(written_old, b"k")
    with pytest.raises(errors.InternalError, match="no matching prefix found"):
        only_new.from_storage(b"plain", b"k")


def test_resources_by_name_group_and_everything() -> None:
    config = parse_encryption_config({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", "resources": [
            {"resources": ["secrets", "deployments.apps"], "providers": [_aescbc("a")]},
            {"resources": ["*.batch"], "providers": [{"secretbox": {"keys": [
                {"name": "b", "secret": base64.b64encode(SECRET).decode()}]}}]},
            {"resources": ["*.*"], "providers": [{"identity": {}}]}]})
    assert config.transformer_for("secrets") is config.transformer_for("deployments.apps")
    assert config.transformer_for("jobs.batch") is not config.transformer_for("secrets")
    assert config.transformer_for("configmaps") is config.transformer_for("widgets.example.com")
    assert parse_encryption_config(_config(_aescbc("a"))).transformer_for("configmaps") is None


@pytest.mark.parametrize("config, message", [
    (_config(), r"resources\[0\].providers: Required value"),
    (_config({"aescbc": {"keys": []}}), r"aescbc.keys: Required value"),
    (_config({"secretbox": {"keys": [{"name": "s", "secret": base64.b64encode(b"x" * 16).decode()}]}}),
     "secret is not of the expected length, got 16"),
    (_config(_aescbc("a:b")), "a non-empty name without ':'"),
    (_config({"aescbc": {"keys": [{"name": "k", "secret": "not base64!"}]}}), "must be base64"),
    ({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", "resources": [
        {"resources": ["secrets"], "providers": [{"identity": {}}]},
        {"resources": ["secrets"], "providers": [{"identity": {}}]}]}, 'Duplicate value: "secrets"'),
])
def test_bad_configurations_name_the_field(config: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_encryption_config(config)
