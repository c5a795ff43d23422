"""Encryption at rest (upstream's k8s.io/apiserver/pkg/storage/value and its
EncryptionConfiguration, `--encryption-provider-config`): per resource, the providers in
order — `aescbc`, `aesgcm`, `secretbox` (each with named keys), `identity` — the first
encrypts what is written, as `k8s:enc:<provider>:v1:<key name>:` then the ciphertext;
any of them reads what it wrote, found by that prefix (`identity` reads plaintext). A
value read with anything but the first provider's first key is stale: written again on
its next update even if unchanged, which is how keys are rotated (add the new key first,
rewrite every object, drop the old key).

The byte layouts are upstream's: aescbc a random IV then AES-CBC with PKCS#7 padding;
aesgcm a random 12-byte nonce then AES-GCM sealed with the etcd key as additional data;
secretbox a random 24-byte nonce then NaCl's secretbox."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import nacl.exceptions
import nacl.secret
import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kubeling import errors

__all__ = ["Transformer", "EncryptionConfig", "load_encryption_config", "parse_encryption_config", "new_aescbc_config"]

_PREFIX = b"k8s:enc:"


class _Provider(Protocol):
    @property
    def prefix(self) -> bytes: ...

    def seal(self, data: bytes, key: bytes) -> bytes: ...

    def open(self, data: bytes, key: bytes) -> bytes: ...


@dataclass(frozen=True)
class _AESCBC:
    prefix: bytes
    secret: bytes

    def seal(self, data: bytes, key: bytes) -> bytes:
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(data) + padder.finalize()
        encryptor = Cipher(algorithms.AES(self.secret), modes.CBC(iv)).encryptor()
        return iv + encryptor.update(padded) + encryptor.finalize()

    def open(self, data: bytes, key: bytes) -> bytes:
        if len(data) < 32 or len(data) % 16:
            raise ValueError("the data is not a whole number of AES blocks after its IV")
        decryptor = Cipher(algorithms.AES(self.secret), modes.CBC(data[:16])).decryptor()
        padded = decryptor.update(data[16:]) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        return unpadder.update(padded) + unpadder.finalize()


@dataclass(frozen=True)
class _AESGCM:
    prefix: bytes
    secret: bytes

    def seal(self, data: bytes, key: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self.secret).encrypt(nonce, data, key)

    def open(self, data: bytes, key: bytes) -> bytes:
        return AESGCM(self.secret).decrypt(data[:12], data[12:], key)


@dataclass(frozen=True)
class _Secretbox:
    prefix: bytes
    secret: bytes

    def seal(self, data: bytes, key: bytes) -> bytes:
        return bytes(nacl.secret.SecretBox(self.secret).encrypt(data))  # nonce, then the box

    def open(self, data: bytes, key: bytes) -> bytes:
        return bytes(nacl.secret.SecretBox(self.secret).decrypt(data))


@dataclass(frozen=True)
class _Identity:
    prefix: bytes = b""

    def seal(self, data: bytes, key: bytes) -> bytes:
        return data

    def open(self, data: bytes, key: bytes) -> bytes:
        return data


@dataclass(frozen=True)
class Transformer:
    """One resource's providers (keys in order): the first writes, any reads its own."""

    providers: tuple[_Provider, ...]

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        first = self.providers[0]
        return first.prefix + first.seal(data, key)

    def from_storage(self, value: bytes, key: bytes) -> tuple[bytes, bool]:
        """The plaintext, and whether it was not written by the first provider (stale)."""
        for i, provider in enumerate(self.providers):
            if provider.prefix and not value.startswith(provider.prefix):
                continue
            if not provider.prefix and value.startswith(_PREFIX):
                continue  # identity reads plaintext only
            try:
                return provider.open(value[len(provider.prefix):], key), i > 0
            except (ValueError, InvalidTag, nacl.exceptions.CryptoError) as err:
                raise errors.InternalError(f"the value at {key!r} cannot be decrypted: {type(err).__name__}") \
                    from None
        raise errors.InternalError(f"the value at {key!r} cannot be read: no matching prefix found")


@dataclass(frozen=True)
class EncryptionConfig:
    """Transformers by resource: `plural.group` (`secrets` for the core group), `*.group`,
    or `*.*`; what none names is stored as it is."""

    rules: tuple[tuple[tuple[str, ...], Transformer], ...]

    def transformer_for(self, group_resource: str) -> Transformer | None:
        group = group_resource.partition(".")[2]
        wanted = (group_resource, f"*.{group}" if group else "*.", "*.*")
        for resources, transformer in self.rules:
            if any(name in resources for name in wanted):
                return transformer
        return None


def _secret(raw: Any, where: str, sizes: tuple[int, ...]) -> bytes:
    try:
        secret = base64.b64decode(str(raw), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{where}: must be base64") from None
    if len(secret) not in sizes:
        raise ValueError(f"{where}: Invalid value: secret is not of the expected length, got {len(secret)}, "
                         f"expected one of {list(sizes)}")
    return secret


_KEYED: dict[str, tuple[Callable[[bytes, bytes], _Provider], tuple[int, ...]]] = {
    "aescbc": (_AESCBC, (16, 24, 32)), "aesgcm": (_AESGCM, (16, 24, 32)), "secretbox": (_Secretbox, (32,))}


def _providers(raw: Any, where: str) -> tuple[_Provider, ...]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: Required value: at least one provider")
    out: list[_Provider] = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ValueError(f"{at}: Invalid value: exactly one provider must be configured")
        (kind, body), = entry.items()
        if kind == "identity":
            out.append(_Identity())
            continue
        if kind not in _KEYED:
            raise ValueError(f'{at}: Unsupported value: "{kind}": supported values: "aescbc", "aesgcm", '
                             '"identity", "secretbox"')
        cls, sizes = _KEYED[kind]
        keys = (body or {}).get("keys") if isinstance(body, dict) else None
        if not isinstance(keys, list) or not keys:
            raise ValueError(f"{at}.{kind}.keys: Required value: at least one key")
        for j, key in enumerate(keys):
            name = (key or {}).get("name") if isinstance(key, dict) else None
            if not name or ":" in str(name):
                raise ValueError(f"{at}.{kind}.keys[{j}].name: Invalid value: a non-empty name without ':'")
            out.append(cls(f"k8s:enc:{kind}:v1:{name}:".encode(),
                           _secret(key.get("secret"), f"{at}.{kind}.keys[{j}].secret", sizes)))
    return tuple(out)


def parse_encryption_config(data: Any, source: str = "the encryption configuration") -> EncryptionConfig:
    if not isinstance(data, dict) or data.get("kind") != "EncryptionConfiguration" or \
            data.get("apiVersion") != "apiserver.config.k8s.io/v1":
        raise ValueError(f"{source}: expected an apiserver.config.k8s.io/v1 EncryptionConfiguration")
    rules = []
    seen: set[str] = set()
    for i, entry in enumerate(data.get("resources") or []):
        where = f"{source}: resources[{i}]"
        names = entry.get("resources") if isinstance(entry, dict) else None
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"{where}.resources: Required value: at least one resource")
        for name in names:
            if name in seen:
                raise ValueError(f'{where}.resources: Duplicate value: "{name}"')
            seen.add(name)
        rules.append((tuple(names), Transformer(_providers(entry.get("providers"), f"{where}.providers"))))
    return EncryptionConfig(tuple(rules))


def load_encryption_config(path: Path) -> EncryptionConfig:
    return parse_encryption_config(yaml.safe_load(path.read_text()), str(path))


def new_aescbc_config(resources: tuple[str, ...] = ("secrets",)) -> dict[str, Any]:
    """A configuration with a fresh 32-byte aescbc key (what `kubeling up` writes once)."""
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", "resources": [{
        "resources": list(resources),
        "providers": [{"aescbc": {"keys": [{"name": "key1", "secret": base64.b64encode(os.urandom(32)).decode()}]}},
                      {"identity": {}}]}]}
