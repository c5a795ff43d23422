"""Leader election on a Lease object, as client-go's leaderelection with a LeaseLock.

Candidates try to acquire or renew every `retry_period`. A lease held by someone else
counts as expired only when its record has not changed for `lease_duration` by *our*
clock (clocks of different machines are never compared). Every write is a
compare-and-swap on the Lease's resourceVersion, so two candidates can never both win.
A leader that cannot renew within `renew_deadline` steps down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.timestamp_pb2 import Timestamp

from kubeling import errors
from kubeling.options import boolean, flag
from protos.kubeling.v1 import coordination_pb2, meta_pb2

__all__ = ["LeaderElector", "ElectionConfig", "ElectionOptions", "LeaseAPI", "HasLeases"]

log = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None]]


class LeaseAPI(Protocol):
    """The Lease verbs an election needs (kubeling.Client's, or the apiserver's own store)."""

    async def get(self, name: str, namespace: str = "") -> coordination_pb2.Lease: ...

    async def create(self, obj: coordination_pb2.Lease) -> coordination_pb2.Lease: ...

    async def update(self, obj: coordination_pb2.Lease) -> coordination_pb2.Lease: ...


class HasLeases(Protocol):
    @property
    def leases(self) -> LeaseAPI: ...


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str = "kube-system"
    name: str = "kube-scheduler"
    lease_duration: float = 15.0  # upstream defaults
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class ElectionOptions:
    """The leader-election flags the scheduler and the controller manager share (upstream's
    LeaderElectionConfiguration), declared once."""

    leader_elect: bool = flag(True, "campaign for the component's kube-system Lease before acting (default true)",
                              type=boolean)
    lease_duration: float = flag(15.0, "seconds a leader's lease lasts without renewal (default %(default)s)",
                                 type=float, name="leader-elect-lease-duration")
    renew_deadline: float = flag(10.0, "seconds a leader keeps trying to renew before it steps down (default "
                                 "%(default)s)", type=float, name="leader-elect-renew-deadline")
    retry_period: float = flag(2.0, "seconds between tries to acquire or renew (default %(default)s)", type=float,
                               name="leader-elect-retry-period")

    def config(self, name: str) -> ElectionConfig:
        """The election on kube-system/<name>."""
        return ElectionConfig(name=name, lease_duration=self.lease_duration, renew_deadline=self.renew_deadline,
                              retry_period=self.retry_period)


def _now() -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(time.time_ns() // 1000 * 1000)  # MicroTime
    return ts


class LeaderElector:
    def __init__(self, client: HasLeases, identity: str, config: ElectionConfig = ElectionConfig(), *,
                 on_started: Callback | None = None, on_stopped: Callback | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if config.renew_deadline >= config.lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self.client = client
        self.identity = identity
        self.config = config
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        self.is_leader = False
        self._observed: tuple[str, bytes, int] | None = None  # (holder, renewTime, transitions)
        self._observed_at = 0.0

    @property
    def observed_holder(self) -> str:
        """Who held the lease when this candidate last read it ("" before its first read), as
        upstream's GetLeader."""
        return self._observed[0] if self._observed is not None else ""

    async def run(self) -> None:
        """Campaign forever: lead while renewals succeed, step down when they do not."""
        last_renew = 0.0
        while True:
            ok = await self._try_acquire_or_renew()
            now = self.clock()
            if ok:
                last_renew = now
                if not self.is_leader:
                    self.is_leader = True
                    log.info("%s became leader of lease %s/%s", self.identity, self.config.namespace, self.config.name)
                    if self.on_started:
                        await self.on_started()
            elif self.is_leader and now - last_renew >= self.config.renew_deadline:
                self.is_leader = False
                log.warning("%s lost lease %s/%s (no renewal for %.1fs)", self.identity,
                            self.config.namespace, self.config.name, now - last_renew)
                if self.on_stopped:
                    await self.on_stopped()
            await asyncio.sleep(self.config.retry_period)

    async def release(self) -> None:
        """Give the lease up (on a clean shutdown), so another candidate takes over at once."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await self.client.leases.get(self.config.name, self.config.namespace)
            if lease.spec.holderIdentity == self.identity:
                lease.spec.holderIdentity = ""
                lease.spec.leaseDurationSeconds = 1
                await self.client.leases.update(lease)
        except errors.ApiError as err:
            log.info("releasing lease: %s", err.message)

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        duration = max(1, int(cfg.lease_duration))
        try:
            lease = await self.client.leases.get(cfg.name, cfg.namespace)
        except errors.NotFound:
            new = coordination_pb2.Lease(
                metadata=meta_pb2.ObjectMeta(name=cfg.name, namespace=cfg.namespace),
                spec=coordination_pb2.LeaseSpec(holderIdentity=self.identity, leaseDurationSeconds=duration,
                                                acquireTime=_now(), renewTime=_now(), leaseTransitions=0))
            try:
                await self.client.leases.create(new)
            except errors.ApiError:
                return False
            self._observe(new)
            return True
        except errors.ApiError as err:
            log.info("leader election: cannot read lease: %s", err.message)
            return False
        spec = lease.spec
        record = (spec.holderIdentity, spec.renewTime.SerializeToString(), spec.leaseTransitions)
        if record != self._observed:
            self._observe(lease)
        held_by_other = spec.holderIdentity and spec.holderIdentity != self.identity
        if held_by_other and self.clock() - self._observed_at < (spec.leaseDurationSeconds or cfg.lease_duration):
            return False
        if spec.holderIdentity != self.identity:
            spec.acquireTime.CopyFrom(_now())
            spec.leaseTransitions = spec.leaseTransitions + 1 if spec.HasField("leaseTransitions") else 0
        spec.holderIdentity = self.identity
        spec.leaseDurationSeconds = duration
        spec.renewTime.CopyFrom(_now())
        try:
            updated = await self.client.leases.update(lease)  # carries resourceVersion: CAS
        except errors.ApiError:
            return False
        self._observe(updated)
        return True

    def _observe(self, lease: coordination_pb2.Lease) -> None:
        spec = lease.spec
        self._observed = (spec.holderIdentity, spec.renewTime.SerializeToString(), spec.leaseTransitions)
        self._observed_at = self.clock()
