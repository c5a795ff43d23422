"""The ingress controller's loop: Ingresses, IngressClasses, Services, EndpointSlices and
Secrets from informers; after a change (no sooner than `min_sync_period` after the last
sync) the routing of this controller's Ingresses (`ingress.model`) becomes HAProxy's
configuration and certificates (`ingress.haproxy`), reloaded only when they changed. Every
Ingress served gets the address HAProxy listens on in `status.loadBalancer` (with its
ports: they are not 80 and 443 here), an event when it is first seen (Sync), and a
warning event for each problem (a missing Service or Secret) when it appears; the other
rules keep being served."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ingress.haproxy import HAProxy, render
from ingress.model import Routing, ingress_content, ours, routing
from kubeling import errors, pki
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import Informer
from kubeling.netutil import host_port_arg, split_host_port
from kubeling.options import flag
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import core_pb2, custom_pb2, discovery_pb2

__all__ = ["IngressConfig", "IngressController", "FAKE_CERTIFICATE_NAME"]

log = logging.getLogger(__name__)

FAKE_CERTIFICATE_NAME = "Kubernetes Ingress Controller Fake Certificate"  # ingress-nginx's default's name
RESYNC_SECONDS = 5.0


@dataclass
class IngressConfig:
    """The ingress controller's settings, each with its flag."""

    http_listen: str = flag("", "HOST:PORT HAProxy serves HTTP on (required)", type=host_port_arg)
    https_listen: str = flag("", "HOST:PORT HAProxy serves HTTPS on (required)", type=host_port_arg)
    state_dir: Path = flag(Path("/var/lib/kubeling/ingress"), "HAProxy's configuration and the certificates "
                           "(default %(default)s)", type=Path)
    status_address: str = flag("", "the address written in the Ingresses' status (default: --http-listen's host)")
    min_sync_period: float = flag(0.2, "seconds between two syncs at least (default %(default)s)", type=float)
    haproxy: str = flag("haproxy", "the HAProxy binary (default %(default)s)")


class IngressController:
    def __init__(self, client: Client, config: IngressConfig) -> None:
        self.client = client
        self.config = config
        self.haproxy = HAProxy(config.state_dir, config.haproxy)
        self.ingresses: Informer[custom_pb2.CustomResource] = Informer(client.ingresses)
        self.classes: Informer[custom_pb2.CustomResource] = Informer(client.ingressclasses)
        self.services: Informer[core_pb2.Service] = Informer(client.services)
        self.slices: Informer[discovery_pb2.EndpointSlice] = Informer(client.endpointslices)
        self.secrets: Informer[core_pb2.Secret] = Informer(client.secrets)
        self.recorder = EventRecorder(client, "ingress-controller")
        self._informers = (self.ingresses, self.classes, self.services, self.slices, self.secrets)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_sync_at = 0.0
        self._default_pem = b""
        self._seen: dict[str, int] = {}  # ingress key -> the generation a Sync event was recorded for
        self._problems: dict[str, list[str]] = {}
        self.routing = Routing()
        self.syncs = 0
        for informer in self._informers:
            informer.add_handler(on_add=self._poke, on_update=lambda old, new: self._poke(new), on_delete=self._poke)

    def _poke(self, _obj: object) -> None:
        self._changed.set()

    @property
    def address(self) -> str:
        return self.config.status_address or split_host_port(self.config.http_listen)[0]

    async def start(self, sync_timeout: float = 60.0) -> None:
        self.config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        cert, key = await asyncio.to_thread(pki.self_signed, FAKE_CERTIFICATE_NAME, ["ingress.local"])
        self._default_pem = cert + key
        for informer in self._informers:
            await informer.start()
        for informer in self._informers:
            await informer.wait_synced(sync_timeout)
        await self.sync()
        if not self.haproxy.pid:
            raise RuntimeError("HAProxy did not start: see the log for its refusal")
        self._task = asyncio.create_task(self._loop(), name="ingress-sync")

    async def _loop(self) -> None:
        while True:
            try:
                # now and then without a change too: an HAProxy that died (its ports still held
                # by a predecessor as it started) is started again
                async with asyncio.timeout(RESYNC_SECONDS):
                    await self._changed.wait()
            except TimeoutError:
                pass
            wait = self._last_sync_at + self.config.min_sync_period - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                await self.sync()
            except Exception as err:  # noqa: BLE001 (retried at the next change)
                log.warning("ingress sync failed: %s", err)
                await asyncio.sleep(1.0)
                self._changed.set()

    async def sync(self) -> None:
        self._changed.clear()
        self._last_sync_at = time.monotonic()
        classes = self.classes.store.list()
        served = [i for i in self.ingresses.store.list()
                  if ours(i, classes) and not i.metadata.HasField("deletionTimestamp")]
        self.routing = routing(served, self.services.store.list(), self.slices.store.list(),
                               self.secrets.store.list())
        certificates = {c.name: (c.pem, c.hosts) for c in self.routing.certificates}
        changed_certs = await asyncio.to_thread(self.haproxy.write_certificates, certificates, self._default_pem)
        config = render(self.routing, self.config.http_listen, self.config.https_listen, self.config.state_dir)
        await self.haproxy.apply(config, force=changed_certs)
        self.syncs += 1
        for ing in served:
            await self._report(ing)

    async def _report(self, ing: custom_pb2.CustomResource) -> None:
        key = f"{ing.metadata.namespace}/{ing.metadata.name}"
        if self._seen.get(key) != ing.metadata.generation:
            self._seen[key] = ing.metadata.generation
            self.recorder.object_event(ing, "networking.k8s.io/v1", "Ingress", NORMAL, "Sync", "Scheduled for sync")
        problems = self.routing.problems.get(key, [])
        for text in problems:
            if text not in self._problems.get(key, []):
                self.recorder.object_event(ing, "networking.k8s.io/v1", "Ingress", WARNING, "Sync", text)
        self._problems[key] = problems
        content = ingress_content(ing)
        ports = [{"port": split_host_port(listen)[1], "protocol": "TCP"}
                 for listen in (self.config.http_listen, self.config.https_listen)]
        wanted = {"ingress": [{"ip": self.address, "ports": ports}]}
        if (content.get("status") or {}).get("loadBalancer") == wanted:
            return
        content["status"] = {"loadBalancer": wanted}
        updated = custom_pb2.CustomResource()
        updated.CopyFrom(ing)
        updated.content = json.dumps(content)
        try:
            await self.client.ingresses.update_status(updated)
        except (errors.NotFound, errors.Conflict):
            self._changed.set()  # gone, or changed meanwhile: the next sync sees it as it is now

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for informer in self._informers:
            await informer.stop()
        await self.haproxy.stop()
        try:
            async with asyncio.timeout(5):
                await self.recorder.flush()
        except TimeoutError:
            pass
