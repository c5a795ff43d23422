"""Pulling images from an OCI distribution registry into the store, as containerd's resolver.

Manifests are asked for with every manifest media type; a manifest list resolves
to this platform; every blob is verified against its digest while it streams into
the store (and the manifest against the digest the registry or the reference
names). Registries answer 401 with a Bearer challenge: the token comes from the
realm it names, anonymously or with the pull's credentials. Where to pull from is
hosts.py's answer: configured mirrors in order, then the registry itself (over
HTTPS; plain HTTP for loopback and insecure registries, as containerd does); a host
that fails or lacks the image hands over to the next. Concurrent pulls of one
reference are done once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import ssl
import tempfile
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from cri.images import reference
from cri.images.hosts import PULL, RESOLVE, HostsConfigError, RegistryHost, RegistryHosts
from cri.images.platforms import pick_manifest
from cri.images.store import (
    DOCKER_MANIFEST,
    MANIFEST_LISTS,
    MANIFEST_TYPES,
    OCI_INDEX,
    OCI_MANIFEST,
    ImageRecord,
    ImageStore,
    ImageStoreError,
)

log = logging.getLogger(__name__)

ACCEPT = ", ".join([OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST, *MANIFEST_LISTS])
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class PullError(Exception):
    """The image cannot be pulled; not_found when the registry has no such image."""

    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


@dataclass
class Credentials:
    username: str = ""
    password: str = ""
    registry_token: str = ""

    @classmethod
    def from_auth(cls, auth: str = "", username: str = "", password: str = "", token: str = "") -> Credentials:
        if auth and not username:
            username, _, password = base64.b64decode(auth).decode().partition(":")
        return cls(username, password, token)


@dataclass
class Puller:
    store: ImageStore
    hosts: RegistryHosts = field(default_factory=RegistryHosts)
    timeout: float = 300.0
    _inflight: dict[str, asyncio.Future[ImageRecord]] = field(default_factory=dict)

    def repull(self, name: str) -> bool:
        """Whether an image already in the store under this name is pulled again (a tag of a
        registry run here on purpose; a digest names content that cannot change)."""
        try:
            ref = reference.parse(name)
        except ValueError:
            return False
        return not ref.digest and self.hosts.deliberate(ref.domain)

    async def pull(self, name: str, credentials: Credentials | None = None) -> ImageRecord:
        ref = reference.parse(name)
        key = str(ref)
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[ImageRecord] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            record = await self._pull(ref, credentials or Credentials())
            future.set_result(record)
            return record
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters get it, nobody is warned it was lost
            raise
        finally:
            del self._inflight[key]

    async def _pull(self, ref: reference.Reference, credentials: Credentials) -> ImageRecord:
        try:
            hosts = self.hosts.hosts_for(ref.domain)
        except (HostsConfigError, OSError) as exc:
            raise PullError(f"{ref}: registry hosts configuration: {exc}") from None
        need = PULL if ref.digest else RESOLVE  # a tag needs a host trusted to resolve it
        candidates = [h for h in hosts if need in h.capabilities]
        if not candidates:
            raise PullError(f"{ref}: no host configured for {ref.domain} has the {need!r} capability")
        failures: list[tuple[RegistryHost, PullError]] = []
        for host in candidates:
            try:
                digest = await self._pull_from(host, ref, credentials)
            except PullError as exc:
                log.info("pull %s from %s failed: %s", ref, host.url, exc)
                failures.append((host, exc))
                continue
            record = self.store.tag(str(ref), digest)
            log.info("pulled %s (%s) from %s", ref, record.id, host.url)
            return record
        if len(failures) == 1:
            raise failures[0][1]
        reasons = "; ".join(f"{host.url}: {str(exc).removeprefix(f'{ref}: ')}" for host, exc in failures)
        raise PullError(f"{ref}: every host failed: {reasons}", not_found=all(e.not_found for _, e in failures))

    async def _pull_from(self, host: RegistryHost, ref: reference.Reference, credentials: Credentials) -> str:
        """Fetch ref's manifest and missing blobs from one host into the store; the manifest digest."""
        session_timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            tls = host.ssl_context()
        except (OSError, ssl.SSLError) as exc:
            raise PullError(f"{ref}: TLS settings for {host.url}: {exc}") from None
        async with aiohttp.ClientSession(timeout=session_timeout) as session:
            client = _Client(session, credentials, host, tls)
            try:
                target = ref.digest or ref.tag
                body, media_type, digest = await client.manifest(f"{ref.path}/manifests/{target}", ref)
                if ref.digest and digest != ref.digest:
                    raise PullError(f"{ref}: manifest digest {digest} does not match the reference")
                if media_type in MANIFEST_LISTS:
                    self.store.put_blob(body, expected=digest)
                    chosen = pick_manifest(json.loads(body), str(ref))
                    body, media_type, digest = await client.manifest(f"{ref.path}/manifests/{chosen['digest']}", ref)
                    if digest != chosen["digest"]:
                        raise PullError(f"{ref}: manifest digest {digest} does not match the list's {chosen['digest']}")
                if media_type not in MANIFEST_TYPES:
                    raise PullError(f"{ref}: unsupported manifest media type {media_type!r}")
                manifest: dict[str, Any] = json.loads(body)
                for blob in (manifest["config"], *manifest["layers"]):
                    if not self.store.has_blob(blob["digest"]):
                        await client.blob(f"{ref.path}/blobs/{blob['digest']}", self.store, blob["digest"],
                                          int(blob["size"]), ref)
                self.store.put_blob(body, expected=digest)
            except aiohttp.ClientError as exc:
                raise PullError(f"{ref}: registry {host.url} unreachable or failing: {exc}") from exc
            except ImageStoreError as exc:
                raise PullError(f"{ref}: {exc}") from exc
        return digest


@dataclass
class _Client:
    session: aiohttp.ClientSession
    credentials: Credentials
    host: RegistryHost
    tls: ssl.SSLContext | bool = True
    token: str = ""

    def _headers(self, accept: str = "") -> dict[str, str]:
        headers = dict(self.host.headers)
        if accept:
            headers["Accept"] = accept
        token = self.token or self.credentials.registry_token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif self.credentials.username:
            headers["Authorization"] = self._basic()
        return headers

    def _basic(self) -> str:
        pair = f"{self.credentials.username}:{self.credentials.password}".encode()
        return f"Basic {base64.b64encode(pair).decode()}"

    async def _authorize(self, challenge: str, ref: reference.Reference) -> None:
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() != "bearer":
            if self.credentials.username:
                return  # Basic: the credentials go with the retry
            raise PullError(f"{ref}: registry wants {scheme} authentication and no credentials were given")
        fields = dict(_CHALLENGE.findall(params))
        query = {k: v for k, v in (("service", fields.get("service", "")),
                                   ("scope", fields.get("scope", f"repository:{ref.path}:pull"))) if v}
        headers = {"Authorization": self._basic()} if self.credentials.username else {}
        async with self.session.get(fields["realm"], params=query, headers=headers, ssl=self.tls) as reply:
            if reply.status != 200:
                raise PullError(f"{ref}: token request to {fields['realm']} failed: HTTP {reply.status}")
            data = await reply.json(content_type=None)
        self.token = data.get("token") or data.get("access_token") or ""
        if not self.token:
            raise PullError(f"{ref}: the token service returned no token")

    async def _get(self, path: str, ref: reference.Reference, accept: str = "") -> aiohttp.ClientResponse:
        url = self.host.api(path)
        for attempt in range(2):
            reply = await self.session.get(url, headers=self._headers(accept), ssl=self.tls)
            if reply.status == 401 and attempt == 0:
                challenge = reply.headers.get("WWW-Authenticate", "")
                reply.release()
                await self._authorize(challenge, ref)
                continue
            where = ref.domain if not self.host.mirror_of else f"{ref.domain}'s mirror {self.host.url}"
            if reply.status == 404:
                reply.release()
                raise PullError(f"{ref}: not found in {where}", not_found=True)
            if reply.status in (401, 403):
                reply.release()
                raise PullError(f"{ref}: access denied by {where} (HTTP {reply.status})")
            if reply.status != 200:
                reply.release()
                raise PullError(f"{ref}: {url} answered HTTP {reply.status}")
            return reply
        raise AssertionError("unreachable")

    async def manifest(self, path: str, ref: reference.Reference) -> tuple[bytes, str, str]:
        reply = await self._get(path, ref, ACCEPT)
        async with reply:
            body = await reply.read()
            media_type = reply.headers.get("Content-Type", "").split(";")[0].strip()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        claimed = reply.headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            raise PullError(f"{ref}: manifest digest mismatch: registry says {claimed}, content is {digest}")
        media_type = json.loads(body).get("mediaType") or media_type
        return body, media_type, digest

    async def blob(self, path: str, store: ImageStore, digest: str, size: int, ref: reference.Reference) -> None:
        reply = await self._get(path, ref)
        # Spooled to a temporary file (not memory), then verified into the store.
        with tempfile.TemporaryFile(dir=store.root) as spool:
            async with reply:
                async for chunk in reply.content.iter_chunked(1 << 20):
                    spool.write(chunk)
            spool.seek(0)
            await asyncio.to_thread(store.put_blob_stream, spool, digest, size)
