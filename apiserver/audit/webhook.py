"""The audit webhook backend in batch mode (upstream's plugin/pkg/audit/webhook with the
buffered backend): events are kept in a buffer of `--audit-webhook-batch-buffer-size` and
POSTed as an `audit.k8s.io/v1` EventList to the server the kubeconfig of
`--audit-webhook-config-file` names, once `--audit-webhook-batch-max-size` are waiting or
`--audit-webhook-batch-max-wait` has passed since the first; a batch the server refuses
(a 5xx, no answer) is sent again after `--audit-webhook-initial-backoff`, growing 1.5x,
five times, then dropped; so are events that find the buffer full. Audit logging never
waits for the webhook. What the tools that read audit webhooks (Falco's k8saudit, audit
collectors) receive."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kubeling.periodic import cancel_and_wait

__all__ = ["AuditWebhook", "WebhookTarget", "load_target"]

log = logging.getLogger(__name__)

_RETRIES = 5
_BACKOFF_FACTOR = 1.5


@dataclass(frozen=True)
class WebhookTarget:
    """Where the events go, from a kubeconfig's current context."""

    url: str
    ssl: ssl.SSLContext | bool  # False: plain HTTP, or TLS not verified
    headers: dict[str, str]


def _data(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    """A kubeconfig's `<key>-data` (base64) or `<key>` (a file, relative to the kubeconfig)."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        return (base / entry[key]).read_bytes()
    return None


def load_target(path: Path) -> WebhookTarget:
    """The webhook of a kubeconfig (its current context, else its only cluster and user);
    ValueError naming what is wrong."""
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: {err}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: not a kubeconfig")

    def named(kind: str, name: str | None) -> dict[str, Any]:
        entries = [e for e in config.get(f"{kind}s") or [] if isinstance(e, dict)]
        found = [e for e in entries if name is None or e.get("name") == name]
        if len(found) != 1 or not isinstance(found[0].get(kind), dict):
            raise ValueError(f"{path}: {kind} {name or ''} not found".replace("  ", " "))
        return found[0][kind]

    context: dict[str, Any] = {}
    if config.get("current-context"):
        context = named("context", config["current-context"])
    cluster = named("cluster", context.get("cluster"))
    user = named("user", context.get("user")) if config.get("users") else {}
    url = cluster.get("server")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"{path}: clusters[].cluster.server: must be an http(s) URL")
    headers = {"Authorization": f"Bearer {user['token']}"} if user.get("token") else {}
    if url.startswith("http://"):
        return WebhookTarget(url, False, headers)
    if cluster.get("insecure-skip-tls-verify"):
        return WebhookTarget(url, False, headers)
    context_ssl = ssl.create_default_context()
    base = path.parent
    ca = _data(cluster, "certificate-authority", base)
    if ca is not None:
        context_ssl.load_verify_locations(cadata=ca.decode())
    cert, key = _data(user, "client-certificate", base), _data(user, "client-key", base)
    if cert is not None and key is not None:
        with tempfile.TemporaryDirectory() as tmp:  # ssl loads a chain from files only
            (Path(tmp) / "c").write_bytes(cert)
            (Path(tmp) / "k").write_bytes(key)
            context_ssl.load_cert_chain(Path(tmp) / "c", Path(tmp) / "k")
    return WebhookTarget(url, context_ssl, headers)


class AuditWebhook:
    def __init__(self, target: WebhookTarget, *, buffer_size: int = 10_000, max_batch: int = 400,
                 max_wait: float = 30.0, initial_backoff: float = 10.0) -> None:
        self.target = target
        self.buffer_size = buffer_size
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.initial_backoff = initial_backoff
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue(buffer_size)
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self.dropped = 0  # events lost: buffer full, or a batch given up

    def write(self, event: dict[str, Any]) -> None:
        try:
            self._events.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or not self.dropped % 1000:
                log.warning("audit webhook: the buffer of %d events is full; %d events dropped",
                            self.buffer_size, self.dropped)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self._task = asyncio.create_task(self._run(), name="audit-webhook")

    async def stop(self) -> None:
        """Send what is buffered (one try), then stop."""
        await cancel_and_wait(self._task)
        batch = self._drain()
        if batch and self._session is not None:
            try:
                await self._post(batch)
            except Exception as err:
                self.dropped += len(batch)
                log.warning("audit webhook: %d events not delivered at shutdown: %s", len(batch), err)
        if self._session is not None:
            await self._session.close()

    def _drain(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while not self._events.empty() and len(out) < self.max_batch:
            out.append(self._events.get_nowait())
        return out

    async def _run(self) -> None:
        while True:
            batch = [await self._events.get()]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.max_wait
            while len(batch) < self.max_batch:
                batch += self._drain()[:self.max_batch - len(batch)]
                if len(batch) >= self.max_batch:
                    break
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(remaining):
                        batch.append(await self._events.get())
                except TimeoutError:
                    break
            await self._deliver(batch)

    async def _deliver(self, batch: list[dict[str, Any]]) -> None:
        delay = self.initial_backoff
        for attempt in range(_RETRIES + 1):
            try:
                await self._post(batch)
                return
            except Exception as err:  # a 5xx, a refused or broken connection: again later
                if attempt == _RETRIES:
                    self.dropped += len(batch)
                    log.warning("audit webhook: %d events dropped after %d tries: %s", len(batch), attempt + 1, err)
                    return
                log.info("audit webhook: sending %d events failed (%s); again in %.1fs", len(batch), err, delay)
                await asyncio.sleep(delay)
                delay *= _BACKOFF_FACTOR

    async def _post(self, batch: list[dict[str, Any]]) -> None:
        assert self._session is not None
        body = json.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": batch},
                          separators=(",", ":"))
        async with self._session.post(self.target.url, data=body, ssl=self.target.ssl,
                                      headers={**self.target.headers, "Content-Type": "application/json"}) as resp:
            if resp.status >= 500:
                raise RuntimeError(f"the webhook answered {resp.status}")
            if resp.status >= 400:  # upstream gives up on a 4xx at once: sending again cannot help
                self.dropped += len(batch)
                log.warning("audit webhook: %d events refused with %d", len(batch), resp.status)
