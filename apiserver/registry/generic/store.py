"""The generic registry: one resource's verbs over etcd and its watch cache.

Kubernetes semantics: create-if-absent, updates as compare-and-swap on the
resourceVersion (mod_revision) with retry when the client gave none, status and
spec updated separately, generation bumped on spec changes, finalizers and
graceful deletion, paged lists pinned to one revision, watches from the cache.
"""

from __future__ import annotations

import builtins
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar, cast

from apiserver.admission.chain import CREATE, DELETE, UPDATE, Admission
from apiserver.registry.generic.codec import codec_for
from apiserver.registry.generic.strategy import Strategy, T, now, timestamp
from apiserver.storage.cacher.cache_watcher import CacheWatcher
from apiserver.storage.cacher.etcd_watcher import EtcdWatcher
from apiserver.storage.cacher.watch_cache import WatchCache
from apiserver.storage.etcd import KV, KeyExists, StaleRevision, Storage
from apiserver.storage.listing import list_objects
from apiserver.storage.selection import Filter
from apiserver.storage.ttl import LeasePool
from apiserver.validation import Checker
from kubeling import errors, names
from kubeling.scheme import ApiObject
from kubeling.selectors import FieldSelector, LabelSelector, SelectorError
from protos.kubeling.v1 import meta_pb2

__all__ = ["Registry", "WriteHooks", "Finish", "MAX_OBJECT_BYTES", "PROPAGATION_POLICIES", "ORPHAN_FINALIZER",
           "FOREGROUND_FINALIZER"]

log = logging.getLogger(__name__)

# etcd's default --max-request-bytes is 1.5 MiB: refuse before etcd does, with a clear message.
MAX_OBJECT_BYTES = 1536 * 1024
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # upstream's: no vowels, no confusables
_MAX_GENERATED_PREFIX = 58
_CONFLICT_RETRIES = 20
# A deletionTimestamp this far ahead is still a valid time (far beyond any real grace period).
MAX_GRACE_SECONDS = 10**10
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
ORPHAN_FINALIZER, FOREGROUND_FINALIZER = "orphan", "foregroundDeletion"  # the garbage collector's

NamespaceCheck = Callable[[str], Awaitable[None]]
# Called once a write that began with a hook is over: True if it was stored.
Finish = Callable[[bool], Awaitable[None]]


def _subresource(status: bool, ephemeral: bool, resize: bool = False, finalize: bool = False,
                 approval: bool = False) -> str:
    return "status" if status else "ephemeralcontainers" if ephemeral else "resize" if resize else \
        "finalize" if finalize else "approval" if approval else ""


async def _nothing_to_finish(stored: bool) -> None:
    return None


_Obj = TypeVar("_Obj", bound=ApiObject, contravariant=True)


class WriteHooks(Protocol[_Obj]):
    """What a resource takes from elsewhere while it is written (upstream's BeginCreate,
    BeginUpdate and AfterDelete: Services' ClusterIPs and node ports)."""

    async def begin_create(self, obj: _Obj, dry_run: bool) -> Finish: ...

    async def begin_update(self, new: _Obj, old: _Obj, dry_run: bool) -> Finish: ...

    async def after_delete(self, obj: _Obj) -> None: ...


class Registry(Generic[T]):
    """One resource's storage, validation and watch cache, driven by its Strategy."""

    def __init__(self, strategy: Strategy[T], storage: Storage, *, prefix: str = "/registry",
                 cache_capacity: int = 10_000, bookmark_interval: float = 60.0,
                 watcher_buffer: int = 1_000, namespace_check: NamespaceCheck | None = None,
                 expiry: LeasePool | None = None, admission: Admission | None = None) -> None:
        self.strategy = strategy
        self.admission = admission
        self.storage = storage
        self.expiry = expiry  # objects written with an expiring lease (Events)
        self.prefix = f"{prefix.rstrip('/')}/{strategy.storage_path}/".encode()
        self.namespace_check = namespace_check
        self.codec = codec_for(strategy)
        self.cache = WatchCache(self.codec, storage, self.prefix, capacity=cache_capacity,
                                bookmark_interval=bookmark_interval,
                                watcher_buffer=watcher_buffer) if strategy.watch_cache else None
        self._etcd_watchers: set[EtcdWatcher] = set()  # without a cache: each watch is on etcd
        self._field_labels = strategy.field_labels()
        self.hooks: WriteHooks[T] | None = None
        # Where stored objects may be in another version than the one written (a custom
        # resource converted by webhook whose storage version changed): the stored object
        # an update starts from, brought to the written version first.
        self.upgrade: Callable[[T], Awaitable[T]] | None = None

    def replace_strategy(self, strategy: Strategy[T]) -> None:
        """A changed definition of the same resource (a CRD's new schema or columns), for
        what is written and selected from now on; storage and cache stay."""
        self.strategy = strategy
        self.codec.replace_strategy(strategy)
        self._field_labels = strategy.field_labels()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.cache is not None:
            await self.cache.start()

    async def wait_ready(self, timeout: float) -> None:
        if self.cache is not None:
            await self.cache.wait_for(0, timeout=timeout)

    @property
    def ready(self) -> bool:
        return self.cache is None or self.cache.ready.is_set()

    async def stop(self) -> None:
        if self.cache is not None:
            await self.cache.stop()
        for w in list(self._etcd_watchers):
            w.terminate(errors.ServiceUnavailable(
                "the apiserver is shutting down; resume from the last resourceVersion"))

    def compacted(self, revision: int) -> None:
        if self.cache is not None:
            self.cache.compacted(revision)

    @property
    def watcher_count(self) -> int:
        return self.cache.watcher_count if self.cache is not None else len(self._etcd_watchers)

    @property
    def watch_cache(self) -> WatchCache:
        """The watch cache, for the parts that read a cached resource's state directly."""
        if self.cache is None:
            raise LookupError(f"{self.strategy.plural} have no watch cache")
        return self.cache

    # ------------------------------------------------------------ encoding

    def key(self, namespace: str, name: str) -> bytes:
        if self.strategy.namespaced:
            return self.prefix + f"{namespace}/{name}".encode()
        return self.prefix + name.encode()

    def decode(self, kv: KV) -> T:
        return self.codec.decode(kv)

    def encode(self, obj: T) -> bytes:
        rv = obj.metadata.resourceVersion
        obj.metadata.resourceVersion = ""  # never stored: etcd's mod_revision is the truth
        data = self.codec.encode(obj, self.key(obj.metadata.namespace if self.strategy.namespaced else "",
                                               obj.metadata.name))
        obj.metadata.resourceVersion = rv
        if len(data) > MAX_OBJECT_BYTES:
            raise errors.RequestEntityTooLarge(
                f"{self.strategy.kind} {obj.metadata.name!r} is {len(data)} bytes encoded; "
                f"the limit is {MAX_OBJECT_BYTES} bytes")
        return data

    def _describe(self, name: str) -> str:
        return f'{self.strategy.resource.group_resource} "{name}"'

    def _details(self, name: str) -> dict[str, str]:
        """What a Status's details say of the object: its name, group and resource."""
        return {"kind": self.strategy.kind, "name": name, "group": self.strategy.resource.group,
                "resource": self.strategy.plural}

    def _invalid(self, obj: T, check: Checker) -> None:
        if check.violations:
            # upstream's NewInvalid: one error as it is, several as an aggregate in brackets
            errs = [str(v) for v in check.violations]
            detail = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
            raise errors.Invalid(f'{self.strategy.qualified_kind} "{obj.metadata.name}" is invalid: {detail}',
                                 metadata=self._details(obj.metadata.name), violations=check.violations)

    def _conflict(self, name: str, detail: str = "the object has been modified; please apply your "
                  "changes to the latest version and try again") -> errors.Conflict:
        return errors.Conflict(f"Operation cannot be fulfilled on {self._describe(name)}: {detail}",
                               metadata=self._details(name))

    def _not_found(self, name: str) -> errors.NotFound:
        return errors.NotFound(f"{self._describe(name)} not found", metadata=self._details(name))

    def _namespace_of(self, obj: T) -> str:
        if not self.strategy.namespaced:
            if obj.metadata.namespace:
                raise errors.BadRequest(f"{self.strategy.plural} are cluster-scoped: metadata.namespace must be empty")
            return ""
        obj.metadata.namespace = obj.metadata.namespace or "default"
        return obj.metadata.namespace

    # ------------------------------------------------------------ verbs

    async def create(self, obj: T, *, dry_run: bool = False) -> T:
        """Store a new object; with `dry_run`, everything but the write (upstream's dryRun=All:
        defaults, admission, validation and the name's uniqueness judged, no resourceVersion)."""
        meta = obj.metadata
        if meta.resourceVersion:
            raise errors.BadRequest("resourceVersion should not be set on objects to be created")
        namespace = self._namespace_of(obj)
        if namespace and self.namespace_check is not None:
            try:
                await self.namespace_check(namespace)
            except errors.Forbidden as err:  # worded as upstream's NamespaceLifecycle plugin refuses
                name = f' "{meta.name}"' if meta.name else ""
                raise errors.Forbidden(f"{self.strategy.resource.group_resource}{name} is forbidden: {err.message}",
                                       metadata={**err.metadata, **self._details(meta.name)}) from None
        generated = not meta.name and bool(meta.generateName)
        meta.uid = str(uuid.uuid4())
        meta.creationTimestamp.CopyFrom(now())
        meta.generation = 1
        meta.ClearField("deletionTimestamp")
        meta.ClearField("deletionGracePeriodSeconds")
        self.strategy.prepare_for_create(obj)
        self.strategy.default(obj)
        if self.admission is not None:
            if await self.admission.mutate(CREATE, self.strategy.plural, obj, dry_run=dry_run):
                self.strategy.default(obj)  # what a webhook added is defaulted too (upstream decodes it again)
        finish = await self.hooks.begin_create(obj, dry_run) if self.hooks is not None else _nothing_to_finish
        stored = False
        try:
            stored = await self._create(obj, namespace, generated, dry_run)
        finally:
            await finish(stored)
        return obj

    async def _create(self, obj: T, namespace: str, generated: bool, dry_run: bool) -> bool:
        """The validated write of create (True: stored; False: a dry run judged it fine)."""
        meta = obj.metadata
        for attempt in range(8 if generated else 1):
            if generated:
                meta.name = meta.generateName[:_MAX_GENERATED_PREFIX] + "".join(
                    secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            check = Checker()
            self._validate_meta(obj, check)
            self.strategy.validate(obj, check)
            self.strategy.validate_create(obj, check)
            self._invalid(obj, check)
            if self.admission is not None:
                await self.admission.admit(CREATE, self.strategy.plural, obj, None, dry_run=dry_run)
            if dry_run:
                existing, _ = await self.storage.get(self.key(namespace, meta.name))
                if existing is None:
                    return False
                if generated and attempt < 7:
                    continue
                raise errors.AlreadyExists(f"{self._describe(meta.name)} already exists",
                                           metadata=self._details(meta.name))
            try:
                rev = await self.storage.create(self.key(namespace, meta.name), self.encode(obj),
                                                lease=await self._lease())
            except KeyExists:
                if generated and attempt < 7:
                    continue
                raise errors.AlreadyExists(f"{self._describe(meta.name)} already exists",
                                           metadata=self._details(meta.name)) from None
            meta.resourceVersion = str(rev)
            return True
        raise AssertionError("unreachable")

    async def _lease(self) -> int:
        """The etcd lease a write attaches (0: none, the object does not expire)."""
        return await self.expiry.lease() if self.expiry is not None else 0

    def _validate_meta(self, obj: T, check: Checker) -> None:
        meta = obj.metadata
        if not meta.name:
            check.add("metadata.name", "Required value: name or generateName is required")
        else:
            check.name("metadata.name", meta.name, self.strategy.validate_name)
        if meta.generateName:
            # a generated name must still be valid once 5 characters are appended
            check.name("metadata.generateName", meta.generateName[:_MAX_GENERATED_PREFIX] + "x",
                       self.strategy.validate_name)
        if self.strategy.namespaced:
            check.name("metadata.namespace", meta.namespace, names.dns1123_label)
        check.labels("metadata.labels", meta.labels)
        check.annotations("metadata.annotations", meta.annotations)
        for i, f in enumerate(meta.finalizers):
            check.name(f"metadata.finalizers[{i}]", f, names.qualified_name)
        for i, ref in enumerate(meta.ownerReferences):
            for fld in ("apiVersion", "kind", "name", "uid"):
                check.required(f"metadata.ownerReferences[{i}].{fld}", getattr(ref, fld))

    async def get(self, namespace: str, name: str, resource_version: str = "") -> T:
        """The object: etcd's latest, or with a resourceVersion ("0": any; N: not older than N)
        the watch cache's, as upstream's GET serves kubelets' frequent reads of their Node
        without an etcd round trip. A cached object is shared: read it, never change it."""
        _require_name(name)
        namespace = self._request_namespace(namespace)
        key = self.key(namespace, name)
        if resource_version:
            rv = _parse_rv(resource_version)
            if self.cache is not None:
                await self.cache.wait_for(rv)
                cached = self.cache.get(key)
                if cached is None:
                    raise self._not_found(name)
                return cast(T, cached)
            kv, revision = await self.storage.get(key)
            if rv > revision:
                raise errors.Timeout(f"Too large resource version: {rv}, current: {revision}")
        else:
            kv, _ = await self.storage.get(key)
        if kv is None:
            raise self._not_found(name)
        return self.decode(kv)

    def _request_namespace(self, namespace: str) -> str:
        if self.strategy.namespaced:
            return namespace or "default"
        return ""

    async def update(self, obj: T, *, status: bool = False, dry_run: bool = False, ephemeral: bool = False,
                     resize: bool = False, finalize: bool = False, approval: bool = False) -> T:
        """Update (spec and metadata) or UpdateStatus (status only); with `dry_run`, judged
        against etcd's copy and answered as the write would be, nothing written. The
        special subresources: pods/ephemeralcontainers, pods/resize, namespaces/finalize,
        certificatesigningrequests/approval."""
        namespace = self._namespace_of(obj)
        name = obj.metadata.name
        if not name:
            raise errors.Invalid(f"{self.strategy.kind} is invalid: metadata.name: Required value",
                                 violations=[errors.FieldViolation("metadata.name", "Required value")])
        key = self.key(namespace, name)
        wanted_rv = obj.metadata.resourceVersion
        if wanted_rv and not wanted_rv.isdigit():
            raise errors.BadRequest(f"metadata.resourceVersion: invalid value {wanted_rv!r}: must be an integer")
        state = self.cached_for_update(key)
        for _ in range(_CONFLICT_RETRIES):
            if state is None:
                state = await self.current_for_update(key, name)
            old, revision, fresh = state
            if self.upgrade is not None:
                old = await self.upgrade(old)
            if wanted_rv and int(wanted_rv) != revision:
                if not fresh:
                    state = None  # the cache may lag behind: ask etcd before calling it a conflict
                    continue
                raise self._conflict(name)
            try:
                new = await self._updated(obj, old, status, ephemeral, dry_run, resize, finalize, approval)
                if self.admission is not None:
                    await self.admission.admit(UPDATE, self.strategy.plural, new, old,
                                               subresource=_subresource(status, ephemeral, resize, finalize,
                                                                        approval),
                                               dry_run=dry_run)
            except errors.ApiError:
                if fresh:
                    raise
                state = None  # judged against a copy that may be old: judge again against etcd's
                continue
            new.metadata.resourceVersion = old.metadata.resourceVersion
            if dry_run and not fresh:
                state = None
                continue
            finish = await self.hooks.begin_update(new, old, dry_run) \
                if self.hooks is not None and not (status or ephemeral or resize or finalize or approval) \
                else _nothing_to_finish
            stored = False
            try:
                if dry_run:
                    return new
                if new.SerializeToString(deterministic=True) == old.SerializeToString(deterministic=True) and \
                        not self.codec.stale(key, revision):
                    if not fresh:
                        state = None  # a no-op against the cache's copy is only one against etcd's
                        continue
                    return old  # a no-op writes nothing (upstream does the same), unless under an old key
                gone = self._ready_to_delete(new)
                try:
                    if gone:
                        rev = await self.storage.delete(key, revision)
                    else:
                        rev = await self.storage.update(key, self.encode(new), revision, lease=await self._lease())
                except StaleRevision as stale:
                    if wanted_rv:
                        raise self._conflict(name) from None
                    state = self.refused_for_update(stale, name)
                    continue
                stored = True
            finally:
                await finish(stored)
            if gone and self.hooks is not None:
                await self.hooks.after_delete(new)
            new.metadata.resourceVersion = str(rev)
            return new
        raise self._conflict(name, "too many concurrent writers; try again")

    async def _updated(self, obj: T, old: T, status: bool, ephemeral: bool = False, dry_run: bool = False,
                       resize: bool = False, finalize: bool = False, approval: bool = False) -> T:
        """obj as it would be stored over old: prepared, defaulted, mutated by admission,
        validated (Invalid)."""
        new = type(obj)()
        new.CopyFrom(obj)
        check = Checker()
        if ephemeral:
            self.strategy.prepare_for_ephemeral_update(new, old)
            await self._mutate_update(new, old, "ephemeralcontainers", dry_run)
            self.strategy.validate_ephemeral_update(new, old, check)
        elif finalize:
            self.strategy.prepare_for_finalize(new, old)
            await self._mutate_update(new, old, "finalize", dry_run)
            self.strategy.validate(new, check)
        elif resize:
            self.strategy.prepare_for_resize(new, old)
            await self._mutate_update(new, old, "resize", dry_run)
            self.strategy.validate_resize(new, old, check)
            if self.strategy.spec_changed(new, old):
                new.metadata.generation = old.metadata.generation + 1
        elif approval:
            self.strategy.prepare_for_approval(new, old)
            await self._mutate_update(new, old, "approval", dry_run)
            self.strategy.validate_approval(new, old, check)
        elif status:
            self.strategy.prepare_for_status_update(new, old)
            await self._mutate_update(new, old, "status", dry_run)
            self.strategy.validate_status(new, check)
            self.strategy.validate_status_update(new, old, check)
        else:
            self._prepare_meta_update(new, old, check)
            self.strategy.prepare_for_update(new, old)
            self.strategy.default(new)
            if await self._mutate_update(new, old, "", dry_run):
                self.strategy.default(new)
            self._validate_meta(new, check)
            self.strategy.validate(new, check)
            self.strategy.validate_update(new, old, check)
            if self.strategy.spec_changed(new, old):
                new.metadata.generation = old.metadata.generation + 1
        self._invalid(new, check)
        return new

    async def _mutate_update(self, new: T, old: T, subresource: str, dry_run: bool) -> bool:
        """Mutating admission of an update; True: a webhook changed the object."""
        if self.admission is None or not self.admission.mutating:
            return False
        return await self.admission.mutate(UPDATE, self.strategy.plural, new, old, subresource=subresource,
                                           dry_run=dry_run)

    # A write starts from the watch cache's copy of the object, not from a read of etcd:
    # the write is a compare-and-swap on the copy's revision, and when etcd refuses it,
    # its answer carries the current object for the next try (upstream's GuaranteedUpdate
    # with the cacher's cachedExistingObject). One etcd call per write instead of two.

    def cached_for_update(self, key: bytes) -> tuple[T, int, bool] | None:
        """The cache's copy of key (copied: cached objects are shared), its revision, and
        False: it may be old."""
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is None:
            return None
        obj: T = type(cached)()
        obj.CopyFrom(cached)
        return obj, int(obj.metadata.resourceVersion), False

    async def current_for_update(self, key: bytes, name: str) -> tuple[T, int, bool]:
        """etcd's copy of key, its revision, and True: it is current."""
        kv, _ = await self.storage.get(key)
        if kv is None:
            raise self._not_found(name)
        return self.decode(kv), kv.mod_revision, True

    def refused_for_update(self, stale: StaleRevision, name: str) -> tuple[T, int, bool]:
        """What etcd held when it refused a compare-and-swap."""
        if stale.current is None:
            raise self._not_found(name)
        return self.decode(stale.current), stale.current.mod_revision, True

    def _prepare_meta_update(self, new: T, old: T, check: Checker) -> None:
        """Server-owned metadata comes from the stored object (upstream BeforeUpdate)."""
        nm, om = new.metadata, old.metadata
        if nm.uid and nm.uid != om.uid:
            check.invalid("metadata.uid", nm.uid, "field is immutable")
        if nm.HasField("creationTimestamp") and nm.creationTimestamp != om.creationTimestamp:
            check.invalid("metadata.creationTimestamp", nm.creationTimestamp.ToJsonString(), "field is immutable")
        nm.uid = om.uid
        if not nm.managedFields:  # a writer that does not send them keeps them (as upstream)
            nm.managedFields.extend(om.managedFields)
        nm.creationTimestamp.CopyFrom(om.creationTimestamp)
        nm.generation = om.generation
        nm.generateName = nm.generateName or om.generateName
        if om.HasField("deletionTimestamp"):
            nm.deletionTimestamp.CopyFrom(om.deletionTimestamp)
        else:
            nm.ClearField("deletionTimestamp")
        if om.HasField("deletionGracePeriodSeconds"):
            nm.deletionGracePeriodSeconds = om.deletionGracePeriodSeconds
        else:
            nm.ClearField("deletionGracePeriodSeconds")
        if om.HasField("deletionTimestamp"):
            added = set(nm.finalizers) - set(om.finalizers)
            if added:
                check.add("metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being "
                                                 f"deleted, found new finalizers {sorted(added)}")

    def _ready_to_delete(self, obj: T) -> bool:
        meta = obj.metadata
        return (meta.HasField("deletionTimestamp") and not meta.finalizers
                and meta.deletionGracePeriodSeconds == 0 and self.strategy.finalized(obj))

    async def delete(self, namespace: str, name: str, *, grace_seconds: int | None = None,
                     preconditions: meta_pb2.Preconditions | None = None, propagation: str | None = None,
                     dry_run: bool = False) -> T:
        _require_name(name)
        if propagation is not None and propagation not in PROPAGATION_POLICIES:
            raise errors.BadRequest(f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                                    + ", ".join(f'"{p}"' for p in PROPAGATION_POLICIES))
        namespace = self._request_namespace(namespace)
        key = self.key(namespace, name)
        if grace_seconds is not None and grace_seconds < 0:
            grace_seconds = 0
        if grace_seconds is not None and grace_seconds > MAX_GRACE_SECONDS:
            raise errors.BadRequest(f"gracePeriodSeconds: invalid value {grace_seconds}: must be at most "
                                    f"{MAX_GRACE_SECONDS}")
        state = self.cached_for_update(key)
        for _ in range(_CONFLICT_RETRIES):
            if state is None:
                state = await self.current_for_update(key, name)
            obj, revision, fresh = state
            if preconditions is not None:
                try:
                    self._check_preconditions(obj, preconditions)
                except errors.Conflict:
                    if fresh:
                        raise
                    state = None
                    continue
            if self.admission is not None:
                try:
                    await self.admission.admit(DELETE, self.strategy.plural, None, obj, dry_run=dry_run)
                except errors.ApiError:
                    if fresh:
                        raise
                    state = None  # judged against the cache's copy: judge again against etcd's
                    continue
            plan = self.strategy.delete_plan(obj, grace_seconds)
            meta = obj.metadata
            gc_changed = self.strategy.garbage_collected and _set_gc_finalizers(meta, propagation)
            pending = bool(meta.finalizers) or not self.strategy.finalized(obj)
            write: bool
            if meta.HasField("deletionTimestamp") and gc_changed:
                write = True  # the garbage collector's instructions changed (orphan <-> foreground)
            elif meta.HasField("deletionTimestamp"):
                current = meta.deletionGracePeriodSeconds
                if plan.graceful and plan.grace_seconds < current:
                    self._mark_deleting(obj, plan.grace_seconds)  # shortening is allowed, never lengthening
                    write = True
                elif not plan.graceful and not pending:
                    write = False
                elif not plan.graceful and current != 0:
                    self._mark_deleting(obj, 0)
                    write = True
                elif not fresh:
                    state = None  # nothing to do, by the cache's copy: make sure with etcd's
                    continue
                else:
                    return obj
            elif plan.graceful or pending:
                self._mark_deleting(obj, plan.grace_seconds if plan.graceful else 0)
                write = True
            else:
                write = False
            if dry_run:
                if not fresh:
                    state = None
                    continue
                return obj  # as it would be: marked for deletion, or as it was before going
            try:
                if write:
                    rev = await self.storage.update(key, self.encode(obj), revision, lease=await self._lease())
                else:
                    rev = await self.storage.delete(key, revision)
            except StaleRevision as stale:
                state = self.refused_for_update(stale, name)
                continue
            if not write and self.hooks is not None:
                await self.hooks.after_delete(obj)
            obj.metadata.resourceVersion = str(rev)
            return obj
        raise self._conflict(name, "too many concurrent writers; try again")

    def _mark_deleting(self, obj: T, grace: int) -> None:
        obj.metadata.deletionTimestamp.CopyFrom(timestamp(now().seconds + grace))
        obj.metadata.deletionGracePeriodSeconds = grace
        self.strategy.mark_deleting(obj)

    def _check_preconditions(self, obj: T, pre: meta_pb2.Preconditions) -> None:
        name = obj.metadata.name
        if pre.HasField("uid") and pre.uid != obj.metadata.uid:
            raise self._conflict(name, f"Precondition failed: UID in precondition: {pre.uid}, "
                                       f"UID in object meta: {obj.metadata.uid}")
        if pre.HasField("resourceVersion") and pre.resourceVersion != obj.metadata.resourceVersion:
            raise self._conflict(name, f"Precondition failed: ResourceVersion in precondition: "
                                       f"{pre.resourceVersion}, ResourceVersion in object meta: "
                                       f"{obj.metadata.resourceVersion}")

    # ------------------------------------------------------------ read many

    def parse_filter(self, namespace: str, label_selector: str, field_selector: str) -> Filter:
        try:
            labels = LabelSelector.parse(label_selector)
            fields = FieldSelector.parse(field_selector)
        except SelectorError as err:
            raise errors.BadRequest(f"unable to parse requirement: {err}") from None
        for f in fields.fields():
            if f not in self._field_labels:
                raise errors.BadRequest(
                    f'field label not supported: "{f}" (for {self.strategy.plural}: '
                    + ", ".join(sorted(self._field_labels)) + ")")
        return Filter(namespace if self.strategy.namespaced else "", labels, fields)

    async def list(self, req: meta_pb2.ListRequest) -> tuple[builtins.list[T], meta_pb2.ListMeta]:
        flt = self.parse_filter(req.namespace, req.labelSelector, req.fieldSelector)
        if req.limit < 0:
            raise errors.BadRequest(f"limit: invalid value {req.limit}: must be >= 0")
        token = getattr(req, "continue")  # a Python keyword: no attribute access
        if req.resourceVersion and not token:
            rv = _parse_rv(req.resourceVersion)
            if self.cache is None:  # etcd's latest state is never older than N
                items, meta = await self.list_from_etcd(flt, req.limit, "")
                if rv > int(meta.resourceVersion):
                    raise errors.Timeout(f"Too large resource version: {rv}, current: {meta.resourceVersion}")
                return items, meta
            # "0" (any) and N (not older than N) are served from the cache, as upstream.
            await self.cache.wait_for(rv)
            items, at = self.cache.list(flt)
            return items, meta_pb2.ListMeta(resourceVersion=str(at))
        if token and req.resourceVersion:
            raise errors.BadRequest("specifying resource version is not allowed when using continue")
        if self.cache is not None and not token and not req.limit and self.cache.ready.is_set():
            # upstream's consistent list from the cache: etcd's current revision, then the
            # cache once it has seen that revision (etcd when it does not soon)
            try:
                await self.cache.wait_for(await self.storage.revision(), timeout=1.0)
            except errors.Timeout:
                return await self.list_from_etcd(flt, 0, "")
            items, at = self.cache.list(flt)
            return items, meta_pb2.ListMeta(resourceVersion=str(at))
        return await self.list_from_etcd(flt, req.limit, token)

    def encoded(self, objs: builtins.list[T], fmt: str, encode: Callable[[T], bytes]) -> builtins.list[bytes]:
        """Objects a LIST gave, in a format: each made once per stored object when it is the
        watch cache's."""
        return self.cache.encoded(objs, fmt, encode) if self.cache is not None else [encode(o) for o in objs]

    async def in_namespace(self, namespace: str) -> builtins.list[T]:
        """Every object in the namespace (the cache's shared copies when cached)."""
        if self.cache is not None:
            return [e.obj for e in self.cache.store.values() if e.obj.metadata.namespace == namespace]
        items, _ = await self.list_from_etcd(Filter(namespace), 0, "")
        return items

    async def list_from_etcd(self, flt: Filter, limit: int,
                             token: str) -> tuple[builtins.list[T], meta_pb2.ListMeta]:
        return await list_objects(self.storage, self.codec, self.prefix, flt, limit, token)

    async def watch(self, req: meta_pb2.WatchRequest) -> CacheWatcher | EtcdWatcher:
        flt = self.parse_filter(req.namespace, req.labelSelector, req.fieldSelector)
        initial_events = req.sendInitialEvents if req.HasField("sendInitialEvents") else None
        _check_watch_list(req, initial_events)
        rv: int | None = None
        if req.resourceVersion not in ("", "0"):
            rv = _parse_rv(req.resourceVersion)
        if self.cache is None:
            w = EtcdWatcher(self.storage, self.codec, self.prefix, flt, rv, initial_events=initial_events,
                            on_end=self._etcd_watchers.discard)
            self._etcd_watchers.add(w)
            return w
        await self.cache.wait_for(rv or 0)
        return self.cache.watch(flt, rv, bookmarks=req.allowWatchBookmarks, initial_events=initial_events)


def _check_watch_list(req: meta_pb2.WatchRequest, initial_events: bool | None) -> None:
    """The watch options of a WatchList, as upstream's validateWatchOptions checks them."""
    match = req.resourceVersionMatch
    if initial_events is not None:
        if match != "NotOlderThan":
            raise errors.BadRequest("resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                                    "resourceVersionMatch to NotOlderThan")
        if not req.allowWatchBookmarks:
            raise errors.BadRequest("allowWatchBookmarks: Forbidden: sendInitialEvents requires setting "
                                    "allowWatchBookmarks to true")
    elif match:
        raise errors.BadRequest("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
                                "unless sendInitialEvents is provided")


def _set_gc_finalizers(meta: meta_pb2.ObjectMeta, propagation: str | None) -> bool:
    """The finalizers that tell the garbage collector what to do with the dependents
    (upstream's deletionFinalizersForGarbageCollection); whether they changed."""
    if propagation is None:
        return False
    wanted = {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER}.get(propagation)
    before = list(meta.finalizers)
    kept = [f for f in before if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER) or f == wanted]
    if wanted is not None and wanted not in kept:
        kept.append(wanted)
    if kept == before:
        return False
    del meta.finalizers[:]
    meta.finalizers.extend(kept)
    return True


def _require_name(name: str) -> None:
    """An empty name would address the resource's bare key prefix (upstream's message)."""
    if not name:
        raise errors.BadRequest("resource name may not be empty")


def _parse_rv(text: str) -> int:
    """A resourceVersion as upstream parses it: an unsigned 64-bit integer."""
    if not text.isdigit() or not text.isascii() or int(text) >= 1 << 64:
        raise errors.BadRequest(f"resourceVersion: invalid value {text!r}: must be a non-negative 64-bit integer")
    return int(text)
