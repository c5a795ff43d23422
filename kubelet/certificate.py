"""The kubelet's certificate manager (upstream's pkg/kubelet/certificate over client-go's
util/certificate): it keeps the node's client certificate (--rotate-certificates) and its
serving certificate (rotateServerCertificates) fresh. At a jittered 70–90 % of the current
certificate's life it makes a new key, asks for a certificate with a
CertificateSigningRequest (signer kubernetes.io/kube-apiserver-client-kubelet or
kubernetes.io/kubelet-serving), waits for it to be approved and issued, keeps it in the
cert dir as `kubelet-<kind>-<time>.pem` (certificate and key, 0600) with
`kubelet-<kind>-current.pem` pointing at it, and hands it over (`on_rotated`): the client
moves new calls to it, the server its new handshakes; nothing restarts and no stream under
way is cut. A request that is denied or fails, or an apiserver away, is retried with
backoff."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from cryptography import x509

from kubeling import csr, dynamic, errors
from kubeling.atomicfile import replace_file
from kubeling.client import Client, TLSConfig
from kubeling.periodic import cancel_and_wait

__all__ = ["CertificateManager", "ClientCredentials", "Kind", "CLIENT", "SERVER", "rotation_deadline", "load_current",
           "split_pem"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kind:
    name: str  # in file names: kubelet-<name>-current.pem
    signer: str
    usages: tuple[str, ...]


CLIENT = Kind("client", csr.KUBE_APISERVER_CLIENT_KUBELET, ("digital signature", "client auth"))
SERVER = Kind("server", csr.KUBELET_SERVING, ("digital signature", "server auth"))
BACKOFF_INITIAL, BACKOFF_MAX = 2.0, 300.0


def rotation_deadline(cert: x509.Certificate, fraction: float | None = None) -> float:
    """upstream's nextRotationDeadline: a jittered 70–90 % into the certificate's life."""
    start, end = cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    return start + (end - start) * (0.7 + 0.2 * (random.random() if fraction is None else fraction))


def split_pem(data: bytes) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a file holding both, as the kubelet's pem files do."""
    cert_at = data.find(b"-----BEGIN CERTIFICATE-----")
    key_at = next((i for i in (data.find(b"-----BEGIN EC PRIVATE KEY"), data.find(b"-----BEGIN PRIVATE KEY"),
                               data.find(b"-----BEGIN RSA PRIVATE KEY")) if i >= 0), -1)
    if cert_at < 0 or key_at < 0:
        raise ValueError("expected a CERTIFICATE and a PRIVATE KEY block")
    if key_at > cert_at:
        return data[cert_at:key_at], data[key_at:]
    return data[cert_at:], data[key_at:cert_at]


def load_current(cert_dir: Path, kind: Kind) -> tuple[bytes, bytes] | None:
    """The certificate and key `kubelet-<kind>-current.pem` holds, if any is there and valid now."""
    path = cert_dir / f"kubelet-{kind.name}-current.pem"
    try:
        cert_pem, key_pem = split_pem(path.read_bytes())
        cert = x509.load_pem_x509_certificate(cert_pem)
    except (OSError, ValueError):
        return None
    return (cert_pem, key_pem) if cert.not_valid_after_utc.timestamp() > time.time() else None


@dataclass
class CertificateManager:
    client: Client
    node_name: str
    cert_dir: Path
    kind: Kind
    current: bytes  # the certificate in use (PEM)
    on_rotated: Callable[[bytes, bytes], Awaitable[None]]  # (certificate PEM, key PEM)
    addresses: tuple[str, ...] = ()  # a serving certificate's names: DNS names and IPs
    clock: Callable[[], float] = time.time
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    rotations: int = field(default=0, init=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"certificate-manager-{self.kind.name}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    def _deadline(self) -> float:
        return rotation_deadline(x509.load_pem_x509_certificate(self.current))

    async def _run(self) -> None:
        backoff = BACKOFF_INITIAL
        while True:
            wait = self._deadline() - self.clock()
            if wait > 0:
                log.info("node %s: %s certificate rotation in %.0f s", self.node_name, self.kind.name, wait)
                await asyncio.sleep(wait)
            try:
                await self.rotate()
                backoff = BACKOFF_INITIAL
            except (errors.ApiError, RuntimeError, OSError, TimeoutError) as err:
                log.warning("node %s: %s certificate not rotated (%s); again in %.0f s", self.node_name,
                            self.kind.name, err, backoff)
                await asyncio.sleep(backoff * (0.9 + 0.2 * random.random()))
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _names(self) -> tuple[list[str], list[str]]:
        dns, ips = [], []
        for address in self.addresses:
            try:
                ipaddress.ip_address(address)
                ips.append(address)
            except ValueError:
                dns.append(address)
        return dns, ips

    async def rotate(self, timeout: float = 900.0) -> None:
        """One rotation: request, wait for the certificate (`timeout`), keep it, hand it over."""
        dns, ips = self._names() if self.kind is SERVER else ([], [])
        request_pem, key_pem = csr.make_request(f"system:node:{self.node_name}", [csr.NODES_GROUP],
                                                dns_names=dns, ips=ips)
        made = await self.client.certificatesigningrequests.create(dynamic.new({
            "metadata": {"generateName": "csr-"},
            "spec": {"request": base64.b64encode(request_pem).decode(), "signerName": self.kind.signer,
                     "usages": list(self.kind.usages)}}))
        name = made.metadata.name
        log.info("node %s: requested a %s certificate (csr %s)", self.node_name, self.kind.name, name)
        async with asyncio.timeout(timeout):
            cert_pem = await self._issued(name, made.metadata.resourceVersion)
        cert = x509.load_pem_x509_certificate(cert_pem)
        if cert.public_key() != x509.load_pem_x509_csr(request_pem).public_key():
            raise RuntimeError(f"csr {name}: the issued certificate is not for the key requested")
        self._keep(cert_pem, key_pem)
        self.current = cert_pem
        self.rotations += 1
        log.info("node %s: %s certificate rotated (csr %s, valid until %s)", self.node_name, self.kind.name, name,
                 cert.not_valid_after_utc.isoformat())
        await self.on_rotated(cert_pem, key_pem)

    async def _issued(self, name: str, resource_version: str) -> bytes:
        """The certificate of csr `name` once issued (a watch from its creation), or why not."""
        while True:
            try:
                async for ev in self.client.certificatesigningrequests.watch(
                        field_selector=f"metadata.name={name}", resource_version=resource_version):
                    resource_version = ev.object.metadata.resourceVersion
                    if ev.type == "DELETED":
                        raise RuntimeError(f"csr {name} was deleted before it was issued")
                    status = dynamic.content_of(ev.object).get("status") or {}
                    for condition in status.get("conditions") or []:
                        if condition.get("type") in ("Denied", "Failed"):
                            raise RuntimeError(f"csr {name} {condition['type'].lower()}: "
                                               f"{condition.get('reason', '')} {condition.get('message', '')}".strip())
                    if status.get("certificate"):
                        return base64.b64decode(status["certificate"])
            except errors.Expired:
                resource_version = ""  # from the current state again

    def _keep(self, cert_pem: bytes, key_pem: bytes) -> None:
        """kubelet-<kind>-<time>.pem (0600) and the kubelet-<kind>-current.pem link, replaced atomically."""
        self.cert_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp = dt.datetime.fromtimestamp(self.clock(), dt.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
        target = self.cert_dir / f"kubelet-{self.kind.name}-{stamp}.pem"
        replace_file(target, cert_pem + key_pem, 0o600)
        link = self.cert_dir / f"kubelet-{self.kind.name}-current.pem"
        temporary = link.with_name(link.name + ".updating")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(target.name)
        temporary.replace(link)


@dataclass
class ClientCredentials:
    """Hands renewed client certificates to the kubelet's Client: new calls go over a new
    channel at once; the old channel, with the streams still on it (informers' watches), is
    closed when the old certificate expires, so an identity does not outlive its certificate
    (the watches resume on the new channel from their resourceVersion)."""

    client: Client
    clock: Callable[[], float] = time.time
    _retiring: set[asyncio.Task[None]] = field(default_factory=set)

    async def use(self, cert_pem: bytes, key_pem: bytes) -> None:
        old_tls = self.client.tls
        if old_tls is None:
            raise RuntimeError("the client has no TLS credentials to renew")
        old = self.client.rotate(TLSConfig(old_tls.ca, cert_pem, key_pem, old_tls.token))
        expiry = x509.load_pem_x509_certificate(old_tls.cert).not_valid_after_utc.timestamp() \
            if old_tls.cert else self.clock()
        task = asyncio.create_task(self._retire(old, expiry - self.clock()), name="retire-client-channel")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    @property
    def retiring(self) -> int:
        """Old channels still open (their certificates not expired yet)."""
        return len(self._retiring)

    async def _retire(self, channel: grpc.aio.Channel, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))
        await self.client.close_retired(channel)
        log.info("the channel of the expired client certificate closed")

    async def stop(self) -> None:
        for task in list(self._retiring):
            await cancel_and_wait(task)
