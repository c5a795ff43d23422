"""Objects in etcd: create-if-absent, compare-and-swap on mod_revision, ranges at a revision.

The aetcd client owns the connection; requests are built from etcd's own rpc messages
so that every answer carries the header revision (aetcd's `get` drops it).
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import Any

import aetcd
import aetcd.watcher
import grpc
from aetcd.rpc import rpc_pb2
from opentelemetry import trace

from kubeling import errors
from kubeling.telemetry import tracer

__all__ = ["KV", "Storage", "StaleRevision", "KeyExists", "Compacted", "EtcdTLS", "NO_SPACE", "open_channel",
           "prefix_end"]

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)

# Messages up to etcd's default request limit plus headroom for lists of many objects.
MAX_MESSAGE = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KV:
    key: bytes
    value: bytes
    mod_revision: int
    create_revision: int
    version: int = 0  # writes since creation
    lease: int = 0  # the lease it goes with (0: none)


class StaleRevision(Exception):
    """A compare-and-swap found another revision; `current` is what etcd holds (None: gone)."""

    def __init__(self, current: KV | None, revision: int) -> None:
        super().__init__("stale revision")
        self.current = current
        self.revision = revision


class KeyExists(Exception):
    def __init__(self, current: KV) -> None:
        super().__init__("key exists")
        self.current = current


class Compacted(Exception):
    """The revision asked for was compacted away; `compact_revision` is the oldest kept."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"required revision has been compacted (oldest kept: {compact_revision})")
        self.compact_revision = compact_revision


def prefix_end(prefix: bytes) -> bytes:
    """The range end that selects every key starting with prefix (etcd's convention)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def _kv(kv: object) -> KV:
    return KV(kv.key, kv.value, kv.mod_revision, kv.create_revision, kv.version,  # type: ignore[attr-defined]
              kv.lease)  # type: ignore[attr-defined]


# etcd's own words (rpctypes.ErrGRPCNoSpace): its NOSPACE alarm is raised, writes are refused
NO_SPACE = "etcdserver: mvcc: database space exceeded"
NO_SPACE_HINT = ("etcd's backend reached its quota and raised the NOSPACE alarm: reads, watches and deletes go on, "
                 "writes resume once space is freed and the alarm disarmed (`kubeling etcd recover`, "
                 "docs/operations.md)")
# how soon a client may retry a request etcd could not answer (the Retry-After it is sent)
RETRY_AFTER_SECONDS = "1"


def _never_sent(details: str) -> bool:
    """A failure that proves etcd never took the request: no connection was made, or etcd
    turned it away before proposing it (its apply queue full)."""
    return "failed to connect" in details or "too many requests" in details


def translate(err: grpc.aio.AioRpcError, what: str, *, write: bool = False) -> Exception:
    """etcd's gRPC failure → an ApiError a person understands (or Compacted). A `write`
    that was lost on the way (the link reset, or no answer in time) may have been applied
    all the same: that is a Timeout (504, upstream's "may still be processing"), never a
    failure the caller could take for "not applied"."""
    details = err.details() or ""
    code = err.code()
    if "compacted" in details:
        return Compacted(0)
    if "request is too large" in details:
        return errors.RequestEntityTooLarge(f"{what}: the object is too large for etcd ({details})")
    if NO_SPACE in details:
        # upstream passes etcd's error through as an internal error (500): so does this,
        # with what an operator does about it
        return errors.InternalError(f"{what}: {NO_SPACE}; {NO_SPACE_HINT}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) or \
            "too many requests" in details:  # etcd's ErrTooManyRequests: its apply queue is full
        retry = {"retryAfterSeconds": RETRY_AFTER_SECONDS}
        if write and not _never_sent(details):
            return errors.Timeout(f"{what}: etcd did not confirm the write ({code.name}: {details}); it may or may "
                                  "not have been applied: read before writing again", metadata=retry)
        return errors.ServiceUnavailable(f"{what}: etcd is unavailable ({details})", metadata=retry)
    return errors.InternalError(f"{what}: etcd failed: {code.name}: {details}")


@dataclass(frozen=True)
class EtcdTLS:
    """The apiserver's TLS to etcd (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`), PEM bytes."""

    ca: bytes
    cert: bytes
    key: bytes


def channel_target(endpoints: list[str]) -> str:
    """One gRPC target for etcd's members: gRPC's own address list when there are several
    (`ipv4:a:p,b:p`; pick_first connects to the first that answers and moves on to the
    next when it goes, as etcd's clientv3 balancer does), else the endpoint itself."""
    if len(endpoints) == 1:
        return endpoints[0]
    for endpoint in endpoints:
        host, _, _ = endpoint.rpartition(":")
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"--etcd: several members must be given by IPv4 address, not {endpoint!r}") from None
    return "ipv4:" + ",".join(endpoints)


def open_channel(target: str, tls: EtcdTLS | None, options: list[tuple[str, Any]] | None = None) -> grpc.aio.Channel:
    """A gRPC channel to etcd's members (channel_target's form), over TLS when given it."""
    options = [*(options or []), ("grpc.lb_policy_name", "pick_first")]
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    creds = grpc.ssl_channel_credentials(tls.ca, tls.key, tls.cert)
    # several members share one name to check: the certificate's (127.0.0.1 and
    # localhost are in every member's, kubeling.pki)
    if target.startswith("ipv4:"):
        options.append(("grpc.ssl_target_name_override", "localhost"))
    return grpc.aio.secure_channel(target, creds, options=options)


class _Client(aetcd.Client):
    """aetcd's client on a channel of ours. aetcd makes only plain-text channels to one
    address; its `connect` is the one place that does, so this one makes the channel (TLS
    and several members) and the same stubs and watcher on it (aetcd 1.0's attributes)."""

    def __init__(self, target: str, tls: EtcdTLS | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._target = target
        self._tls = tls

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        self.channel = open_channel(self._target, self._tls, list(self._options.items()))
        self.kvstub = aetcd.rpc.KVStub(self.channel)
        self.clusterstub = aetcd.rpc.ClusterStub(self.channel)
        self.leasestub = aetcd.rpc.LeaseStub(self.channel)
        self.maintenancestub = aetcd.rpc.MaintenanceStub(self.channel)
        self._watcher = aetcd.watcher.Watcher(aetcd.rpc.WatchStub(self.channel), timeout=self._timeout,
                                              metadata=self.metadata)
        self._connected.set()


class Storage:
    """Byte-level access to etcd for the registries; one per apiserver."""

    def __init__(self, client: aetcd.Client, timeout: float = 10.0) -> None:
        self.client = client
        self.timeout = timeout

    @classmethod
    async def connect(cls, endpoints: str, tls: EtcdTLS | None = None, *, timeout: float = 10.0,
                      keepalive_ms: int = 30_000, keepalive_timeout_ms: int = 10_000) -> Storage:
        """endpoints: HOST:PORT, or several (etcd's members) separated by commas; `timeout`:
        seconds each call may take."""
        target = channel_target([e.strip() for e in endpoints.split(",") if e.strip()])
        client = _Client(target, tls, options={
            "grpc.max_receive_message_length": MAX_MESSAGE,
            "grpc.max_send_message_length": MAX_MESSAGE,
            # Reconnect quickly when etcd comes back (gRPC's default backs off up to 120 s).
            "grpc.initial_reconnect_backoff_ms": 100,
            "grpc.min_reconnect_backoff_ms": 100,
            "grpc.max_reconnect_backoff_ms": 2_000,
            # upstream's keepalive to etcd (30 s, 10 s to answer): a connection that went
            # silent (a link blackholed, a member frozen) is closed and made again, so a watch
            # on it resumes instead of waiting forever for events that cannot come
            # (gRPC core gives up on an unanswered ping after http2.ping_timeout_ms, 60 s by
            # default, whatever keepalive_timeout_ms says: both are set, or a dead link is
            # found a minute late)
            "grpc.keepalive_time_ms": keepalive_ms,
            "grpc.keepalive_timeout_ms": keepalive_timeout_ms,
            "grpc.http2.ping_timeout_ms": keepalive_timeout_ms,
        })
        await client.connect()
        return cls(client, timeout)

    @property
    def channel(self) -> grpc.aio.Channel:
        return self.client.channel

    async def close(self) -> None:
        await self.client.close()

    async def _call(self, what: str, method: str, request: object) -> object:
        try:
            return await self._call_once(what, method, request)
        except errors.ServiceUnavailable:
            if method != "Range":
                raise  # a write is never repeated: only its caller can tell whether it was applied
        # A read is safe to repeat: once more, on whichever member the channel reaches now
        # (the one it used may just have died).
        return await self._call_once(what, method, request)

    async def _call_once(self, what: str, method: str, request: object) -> object:
        stub = self.client.kvstub
        try:
            if not trace.get_current_span().is_recording():
                return await getattr(stub, method)(request, timeout=self.timeout)
            # aetcd builds its channel from its own reference to grpc.aio.insecure_channel,
            # so the gRPC instrumentation never sees it: the span is made here, as otelgrpc
            # would name it in upstream's etcd client.
            with _TRACER.start_as_current_span(f"/etcdserverpb.KV/{method}", kind=trace.SpanKind.CLIENT, attributes={
                    "rpc.system": "grpc", "rpc.service": "etcdserverpb.KV", "rpc.method": method,
                    "etcd.operation": what}):
                return await getattr(stub, method)(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as err:
            raise translate(err, what, write=method != "Range") from None

    async def get(self, key: bytes) -> tuple[KV | None, int]:
        """(the key's KV or None, the revision read at)."""
        resp = await self._call(f"get {key.decode()}", "Range", rpc_pb2.RangeRequest(key=key))
        kvs = resp.kvs  # type: ignore[attr-defined]
        return (_kv(kvs[0]) if kvs else None), resp.header.revision  # type: ignore[attr-defined]

    async def range(self, start: bytes, end: bytes, *, revision: int = 0, limit: int = 0,
                    count_only: bool = False, what: str = "") -> tuple[list[KV], int, bool, int]:
        """(kvs sorted by key, header revision, more, total count in range)."""
        req = rpc_pb2.RangeRequest(key=start, range_end=end, revision=revision, limit=limit,
                                   count_only=count_only)
        resp = await self._call(what or f"list {start.decode(errors='replace')}", "Range", req)
        return ([_kv(kv) for kv in resp.kvs], resp.header.revision,  # type: ignore[attr-defined]
                resp.more, resp.count)  # type: ignore[attr-defined]

    async def revision(self) -> int:
        """etcd's current revision, from the header of a read of one key that never exists.
        (Not a range ending in "\\0": to etcd that means every key from the start, and even
        count-only it walks them all; every consistent LIST asks for the revision.)"""
        _, rev, _, _ = await self.range(b"\0", b"", count_only=True, what="read the current revision")
        return rev

    async def _txn(self, what: str, key: bytes, compare: rpc_pb2.Compare,
                   success: rpc_pb2.RequestOp) -> tuple[bool, KV | None, int]:
        """If compare holds, run success; else read key. (succeeded, key's KV on failure, revision)."""
        txn = rpc_pb2.TxnRequest(compare=[compare], success=[success],
                                 failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))])
        resp = await self._call(what, "Txn", txn)
        revision = resp.header.revision  # type: ignore[attr-defined]
        if resp.succeeded:  # type: ignore[attr-defined]
            return True, None, revision
        kvs = resp.responses[0].response_range.kvs  # type: ignore[attr-defined]
        return False, (_kv(kvs[0]) if kvs else None), revision

    @staticmethod
    def _mod_is(key: bytes, revision: int) -> rpc_pb2.Compare:
        return rpc_pb2.Compare(key=key, target=rpc_pb2.Compare.MOD, result=rpc_pb2.Compare.EQUAL,
                               mod_revision=revision)

    async def create(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        """Put key only when absent; return the new mod_revision or raise KeyExists.
        With a lease, etcd deletes the key when the lease expires."""
        try:
            ok, current, revision = await self._txn(
                f"create {key.decode()}", key, self._mod_is(key, 0),
                rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease)))
        except errors.InternalError as err:
            return await self._applied_despite_no_space(err, key, value, not_revision=0)
        if not ok:
            assert current is not None
            raise KeyExists(current)
        return revision

    async def update(self, key: bytes, value: bytes, expected_revision: int, *, lease: int = 0) -> int:
        """Put key only while its mod_revision is expected_revision, else StaleRevision."""
        try:
            ok, current, revision = await self._txn(
                f"update {key.decode()}", key, self._mod_is(key, expected_revision),
                rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease)))
        except errors.InternalError as err:
            return await self._applied_despite_no_space(err, key, value, not_revision=expected_revision)
        if not ok:
            raise StaleRevision(current, revision)
        return revision

    async def _applied_despite_no_space(self, err: errors.InternalError, key: bytes, value: bytes, *,
                                        not_revision: int) -> int:
        """etcd applies the write that crosses its quota and only then answers NOSPACE
        (its quotaApplierV3: apply, then `if !ok { err = ErrNoSpace }`) and raises the
        alarm; every write after it is refused before it is applied. So a NOSPACE answer
        does not say "not applied": read the key, and if it holds exactly this value at a
        new revision, the write is done (create and update values carry a fresh uid or
        content, so an equal value at another revision is this write). Else the refusal
        stands."""
        if NO_SPACE not in err.message:
            raise err
        current, _ = await self.get(key)
        if current is None or current.value != value or current.mod_revision == not_revision:
            raise err
        log.warning("%s was applied although etcd answered NOSPACE (the write that raised the alarm)",
                    key.decode())
        return current.mod_revision

    async def delete(self, key: bytes, expected_revision: int) -> int:
        """Delete key only while its mod_revision is expected_revision; return the delete's revision."""
        ok, current, revision = await self._txn(
            f"delete {key.decode()}", key, self._mod_is(key, expected_revision),
            rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key)))
        if not ok:
            raise StaleRevision(current, revision)
        return revision

    async def put(self, key: bytes, value: bytes) -> int:
        resp = await self._call(f"put {key.decode()}", "Put", rpc_pb2.PutRequest(key=key, value=value))
        return resp.header.revision  # type: ignore[attr-defined]

    async def grant_lease(self, ttl_seconds: int) -> int:
        """A new etcd lease of ttl_seconds; keys attached to it vanish when it expires."""
        try:
            resp = await self.client.leasestub.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=ttl_seconds),
                                                          timeout=self.timeout)
        except grpc.aio.AioRpcError as err:
            raise translate(err, f"grant a {ttl_seconds}s lease", write=True) from None
        if resp.error:
            raise errors.InternalError(f"grant a {ttl_seconds}s lease: etcd: {resp.error}")
        return int(resp.ID)

    async def compact(self, revision: int, *, physical: bool = False, timeout: float = 0.0) -> None:
        """Compact history up to revision; `physical`: answer once the member has dropped
        it from its file (what a defragmentation after it can then give back)."""
        try:
            await self.client.kvstub.Compact(rpc_pb2.CompactionRequest(revision=revision, physical=physical),
                                             timeout=timeout or self.timeout)
        except grpc.aio.AioRpcError as err:
            if "compacted" in (err.details() or ""):
                return  # someone compacted further already
            raise translate(err, f"compact to {revision}") from None

    async def put_if_version(self, key: bytes, value: bytes, version: int) -> tuple[bool, KV | None]:
        """Put key while its version (number of writes since creation) is `version`.

        Used for the shared compaction marker, as upstream's compactor does."""
        ok, current, _ = await self._txn(
            f"compare-and-put {key.decode()}", key,
            rpc_pb2.Compare(key=key, target=rpc_pb2.Compare.VERSION, result=rpc_pb2.Compare.EQUAL,
                            version=version),
            rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value)))
        return ok, current
