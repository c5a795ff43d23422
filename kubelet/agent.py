"""The kubelet agent: makes the apiserver's pods for this node true in the runtime.

Start-up order (as kubelet.go's Run): the CRI runtime (hosted here unless an
endpoint is given), the daemon endpoint, node registration, the pod CIDR handed to
the runtime (which writes the node's network config), the lease and status loops,
then the pod informer, workers, PLEG and housekeeping.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509

from cri.server import CRIConfig, CRIServer
from kubelet.backoff import Backoff
from kubelet.certificate import CLIENT, SERVER, CertificateManager, ClientCredentials, load_current
from kubelet.config import KubeletConfig
from kubelet.csi import CSIDrivers
from kubelet.dns import DNSSettings
from kubelet.envvars import MASTER_NAMESPACE, service_env
from kubelet.eviction import (
    CRITICAL_PRIORITY,
    EvictionManager,
    PodUsage,
    observe,
    parse_grace_periods,
    parse_thresholds,
)
from kubelet.imagegc import ImageGC
from kubelet.logrotation import ContainerLogManager
from kubelet.node import NodeManager, allocatable, machine_capacity
from kubelet.nodeendpoints import NodeEndpoints
from kubelet.pleg import PLEG
from kubelet.pluginmanager import PluginManager
from kubelet.podconfig import EMPTY_DIR, PodPaths, grace_period
from kubelet.podworkers import Outcome, PodWorkers, pods_differ_semantically
from kubelet.probes import READINESS, STARTUP, ProbeManager
from kubelet.qos import oom_score_floor
from kubelet.routes import PodRoutes
from kubelet.runtime import EXITED, RUNNING, CRICallError, PodRuntimeStatus, Runtime
from kubelet.server import DaemonServer
from kubelet.status import TERMINAL, StatusInputs, StatusManager, generate_pod_status, qos_class
from kubelet.summary import SummaryProvider
from kubelet.syncpod import PodSyncer
from kubelet.sysctls import FORBIDDEN_REASON, forbidden_sysctl
from kubelet.volumemanager import VolumeManager, disk_usage
from kubelet.volumes import MountError, PodVolumes
from kubeling import errors, timestamps
from kubeling.client import Client, TLSConfig
from kubeling.events import EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer
from kubeling.options import ConfigError
from kubeling.periodic import Periodic
from kubeling.quantity import QuantityError, parse_quantity
from kubeling.servingtls import ServingTLS
from kubeling.telemetry import pod_attributes, pod_context, tracer
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["Kubelet", "bridge_name", "runtime_config"]

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)


def _requests(pod: Pod, resource: str) -> int:
    """The pod's request of cpu (millicores) or memory (milli-bytes), app containers and sidecars."""
    total = 0
    for c in [*pod.spec.containers, *(c for c in pod.spec.initContainers if c.restartPolicy == "Always")]:
        try:
            total += parse_quantity(c.resources.requests.get(resource, "0")).milli_value()
        except QuantityError:
            pass
    return total


def bridge_name(node: str) -> str:
    """The node's Linux bridge: at most 15 characters (IFNAMSIZ - 1)."""
    name = f"kbl-{node}"
    return name if len(name) <= 15 else f"kbl-{hashlib.sha1(node.encode()).hexdigest()[:11]}"


def runtime_config(cfg: KubeletConfig) -> CRIConfig:
    """The CRI runtime a kubelet hosts: its state, socket, network and runc root all per node."""
    state = cfg.state_dir
    return CRIConfig(socket=state / "cri.sock", state_dir=state / "cri",
                     cni_conf_dir=cfg.cni_conf_dir or state / "net.d", cni_bin_dirs=cfg.cni_bin_dirs,
                     cni_cache_dir=state / "cni-cache",
                     runc_root=cfg.runc_root or Path("/run/kubeling/runc") / cfg.node_name,
                     bridge=bridge_name(cfg.node_name), cluster_cidr=cfg.cluster_cidr, service_cidr=cfg.service_cidr,
                     node_network=cfg.node_network,
                     ipam_data_dir=state / "cni-ipam", registry_config_dir=cfg.registry_config_dir,
                     streaming_listen=cfg.streaming_listen)


def _not_after(cert_pem: bytes) -> float:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()


@dataclass
class Kubelet:
    config: KubeletConfig
    cri: CRIServer | None = None
    runtime: Runtime | None = None
    client: Client | None = None
    node: NodeManager | None = None
    server: DaemonServer | None = None
    routes: PodRoutes | None = None
    _parts: list[Any] = field(default_factory=list)
    _started: bool = False
    _last_gc: dict[str, float] = field(default_factory=dict)  # pod UID -> monotonic time
    _seen: dict[str, dict[str, int]] = field(default_factory=dict)  # pod UID -> runtime states at its last sync
    _mount_errors: dict[str, str] = field(default_factory=dict)  # pod UID -> the FailedMount last told
    _evicted: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # pod UID -> (why, grace override)
    # made by start():
    recorder: EventRecorder = field(init=False)
    paths: PodPaths = field(init=False)
    eviction: EvictionManager = field(init=False)
    _image_gc: ImageGC = field(init=False)
    allocatable: dict[str, str] = field(init=False)
    volumes: PodVolumes = field(init=False)
    csi: CSIDrivers = field(init=False)
    volume_manager: VolumeManager = field(init=False)
    plugins: PluginManager = field(init=False)
    informer: Informer[Any] = field(init=False)
    services: Informer[core_pb2.Service] = field(init=False)
    status: StatusManager = field(init=False)
    workers: PodWorkers = field(init=False)
    probes: ProbeManager = field(init=False)
    syncer: PodSyncer = field(init=False)
    pleg: PLEG = field(init=False)
    runtime_name: str = field(init=False, default="")

    # ---- wiring ----

    async def start(self) -> None:
        cfg = self.config
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        endpoint = cfg.container_runtime_endpoint
        if endpoint:
            self.runtime = runtime = Runtime(endpoint)
        else:
            self.cri = cri = CRIServer(runtime_config(cfg))
            await cri.start()
            endpoint = cri.address
            self.runtime = runtime = Runtime.in_process(endpoint, cri.runtime_service, cri.image_service)
        self.client = client = Client.from_kubeconfig(cfg.kubeconfig) if cfg.kubeconfig is not None \
            else Client(cfg.apiserver)
        await self._renewed_client_certificate(client)
        self.recorder = EventRecorder(client, "kubelet", host=cfg.node_name)
        self.paths = PodPaths(cfg.pod_logs_dir, cfg.state_dir / "pods", dict(cfg.host_path_mounts))
        self.eviction = EvictionManager(
            parse_thresholds(cfg.eviction_hard),
            parse_thresholds(cfg.eviction_soft, parse_grace_periods(cfg.eviction_soft_grace_period)),
            cfg.eviction_pressure_transition_period, cfg.eviction_max_pod_grace_period)
        # the node's allocatable (the limits a container without its own gets in the downward API)
        self.allocatable = allocatable(machine_capacity(cfg.max_pods), cfg.reserved, self.eviction.hard_memory)
        self.volumes = PodVolumes(client, self.paths, client.tls.ca if client.tls is not None else b"",
                                  self.allocatable)
        self.csi = CSIDrivers(client, cfg.node_name, cfg.state_dir / "plugins", self.paths.pods_dir)
        self.volume_manager = VolumeManager(client, self.paths, self.csi)
        self.plugins = PluginManager(cfg.state_dir / "plugins_registry", self.csi.register, self.csi.deregister)
        self.informer = Informer(client.pods, field_selector=f"spec.nodeName={cfg.node_name}")
        self.services = Informer(client.services)  # for the containers' Service environment variables
        tls = ServingTLS(cfg.tls_cert_file, cfg.tls_private_key_file, cfg.client_ca_file) \
            if cfg.tls_cert_file is not None and cfg.tls_private_key_file is not None else None
        kept_server = load_current(self.cert_dir, SERVER) if cfg.rotate_server_certificates else None
        if tls is not None and kept_server is not None:  # renewed before this start: it wins over the file's
            current = self.cert_dir / "kubelet-server-current.pem"
            tls = ServingTLS(current, current, cfg.client_ca_file)
        self.server = DaemonServer(runtime, self._find_pod, cfg.address, cfg.port, tls,
                                   summary=SummaryProvider(runtime, cfg.node_name),
                                   node=NodeEndpoints(runtime, cfg, lambda: self.informer.store.list()))
        await self.server.start()
        if cfg.rotate_server_certificates and tls is not None:
            server = self.server
            manager = CertificateManager(
                client, cfg.node_name, self.cert_dir, SERVER, tls.cert_file.read_bytes(),
                lambda cert, key: server.use_certificate(self.cert_dir / "kubelet-server-current.pem"),
                addresses=tuple(dict.fromkeys((cfg.node_name, cfg.node_ip))))
            manager.start()
            self._parts.append(manager)

        self._image_gc = ImageGC(runtime, cfg.image_gc_high_threshold_percent, cfg.image_gc_low_threshold_percent,
                                 cfg.image_minimum_gc_age, on_failure=self._disk_space_failed)
        self.node = node = NodeManager(client, runtime, cfg.node_name, cfg.node_ip, self.server.port, cfg.state_dir,
                                       cfg.max_pods, dict(cfg.node_labels), cfg.node_status_report_frequency,
                                       cfg.node_lease_duration_seconds, pressure=self.eviction.pressure,
                                       reserved=cfg.reserved, eviction_memory=self.eviction.hard_memory,
                                       taints=list(cfg.register_with_taints))
        await node.register()
        await node.watch_own_node()
        cidr = await node.wait_for_pod_cidr()
        await runtime.update_pod_cidr(cidr)
        log.info("node %s: pod CIDR %s, bridge %s", cfg.node_name, cidr, bridge_name(cfg.node_name))
        if cfg.pod_routes:
            self.routes = PodRoutes(client, cfg.node_name, cfg.cluster_cidr)
            await self.routes.start()
        await node.update_status(force=True)  # Ready now that the network is configured
        await node.renew_lease()
        await self.csi.ensure_csinode()
        await self.plugins.start()  # CSI drivers register from here on

        self.status = StatusManager(client, cfg.node_name)
        self.workers = PodWorkers(self._sync_pod, cfg.sync_frequency)
        self.probes = ProbeManager(runtime, self.recorder, self.workers.wake, cfg.node_ip)
        self.syncer = PodSyncer(runtime, self.paths, cfg.node_ip, self.recorder, self.probes,
                                Backoff(cfg.crash_loop_backoff_initial, cfg.crash_loop_backoff_max),
                                Backoff(cfg.crash_loop_backoff_initial, cfg.crash_loop_backoff_max),
                                cluster_domain=cfg.cluster_domain, cgroup_parent=cfg.cgroup_root,
                                env_sources=self.volumes.env_sources, claim_paths=self.volume_manager.host_paths,
                                service_env=lambda pod: service_env(pod, self._services_for(pod)),
                                runtime_handler=self._runtime_handler, allocatable=self.allocatable,
                                oom_floor=oom_score_floor(), fits=self._fits,
                                dns=DNSSettings(list(cfg.cluster_dns), cfg.cluster_domain, cfg.resolv_conf))
        self.runtime_name = (await runtime.version()).runtime_name
        self.informer.add_handler(on_add=self._on_pod, on_update=lambda old, new: self._on_pod(new),
                                  on_delete=self._on_pod_deleted)
        await self.services.start()
        await self.informer.start()
        await self.services.wait_synced(timeout=60)
        await self.informer.wait_synced(timeout=60)
        self.pleg = PLEG(runtime, self._on_pleg, cfg.pleg_relist_period)
        await self.pleg.relist()
        self.pleg.start()
        loops = [Periodic("node-lease", cfg.node_lease_duration_seconds / 4, node.renew_lease),
                 Periodic("node-status", cfg.node_status_update_frequency, node.update_status),
                 Periodic("housekeeping", cfg.housekeeping_interval, self._housekeeping),
                 Periodic("eviction", cfg.eviction_monitoring_period, self._evict),
                 Periodic("image-gc", cfg.image_gc_period, self._collect_images),
                 Periodic("container-logs", cfg.container_log_monitor_interval, ContainerLogManager(
                     runtime, parse_quantity(cfg.container_log_max_size).int_value(),
                     cfg.container_log_max_files).rotate_all)]
        for loop in loops:
            loop.start()
        self._parts += loops
        self._started = True
        await self._housekeeping()
        log.info("kubelet %s running (CRI %s, daemon port %d)", cfg.node_name, endpoint, self.server.port)

    def _services_for(self, pod: Pod) -> list[core_pb2.Service]:
        """The Services a pod's environment can name: its namespace's and `default`'s (not
        every Service of the cluster, at each container start)."""
        namespace = pod.metadata.namespace
        found = self.services.store.by_index(INDEX_NAMESPACE, namespace)
        return found if namespace == MASTER_NAMESPACE else \
            [*found, *self.services.store.by_index(INDEX_NAMESPACE, MASTER_NAMESPACE)]

    async def _runtime_handler(self, name: str) -> str:
        assert self.client is not None  # started: the client exists
        return (await self.client.runtimeclasses.get(name)).handler

    @property
    def cert_dir(self) -> Path:
        return self.config.cert_dir or self.config.state_dir / "pki"

    async def _renewed_client_certificate(self, client: Client) -> None:
        """With --rotate-certificates: the client certificate renewed before this start (if
        it outlives the kubeconfig's) in use from the first call, and renewed from now on."""
        if not self.config.rotate_certificates:
            return
        if client.tls is None or client.tls.cert is None or client.tls.key is None:
            raise ConfigError("rotateCertificates needs a kubeconfig with this node's client certificate")
        credentials = ClientCredentials(client)
        kept = load_current(self.cert_dir, CLIENT)
        current = client.tls.cert
        if kept is not None and _not_after(kept[0]) > _not_after(current):
            await client.close_retired(client.rotate(TLSConfig(client.tls.ca, kept[0], kept[1], client.tls.token)))
            current = kept[0]
        manager = CertificateManager(client, self.config.node_name, self.cert_dir, CLIENT, current, credentials.use)
        manager.start()
        self._parts += [manager, credentials]

    async def stop(self) -> None:
        """Stop the agent; pods keep running (a restarted kubelet adopts them)."""
        for loop in self._parts:
            await loop.stop()
        if self._started:
            await self.plugins.stop()
            await self.csi.close()
            await self.pleg.stop()
            await self.informer.stop()
            await self.services.stop()
            await self.workers.stop()
            await self.probes.close()
            await self.syncer.close()
            await self.recorder.flush()
        if self.routes is not None:
            await self.routes.stop()
        if self.node is not None:
            await self.node.stop()
        if self.server is not None:
            await self.server.stop()
        if self.client is not None:
            await self.client.close()
        if self.runtime is not None:
            await self.runtime.close()
        if self.cri is not None:
            await self.cri.stop()

    # ---- events in ----

    def _find_pod(self, namespace: str, name: str) -> tuple[Pod, core_pb2.PodStatus] | None:
        pod = self.informer.store.get(f"{namespace}/{name}")
        if pod is None:
            return None
        return pod, self.status.last(pod.metadata.uid) or pod.status

    async def _on_pod(self, pod: Pod) -> None:
        current = self.workers.pod(pod.metadata.uid)
        if current is not None and not pods_differ_semantically(current, pod) and not self._reconcile(pod):
            # Only the status changed, mostly by this kubelet's own writes: keep the newest
            # object without a sync (upstream's checkAndUpdatePod). The kubelet is the
            # source of the status; syncing on each of its own writes doubled the syncs
            # of a pod start.
            self.workers.update(pod, wake=False)
            return
        self.workers.update(pod)

    def _reconcile(self, pod: Pod) -> bool:
        """A status change the kubelet has to act on (upstream's HandlePodReconcile): the
        pod made terminal by someone else, or a readiness gate's condition changed (Ready
        is the kubelet's to recompute, as upstream's NeedToReconcilePodReadiness)."""
        last = self.status.last(pod.metadata.uid)
        if pod.status.phase in TERMINAL and (last is None or last.phase != pod.status.phase):
            return True
        if pod.spec.readinessGates and last is not None:
            gates = {g.conditionType for g in pod.spec.readinessGates}
            return {c.type: c.status for c in pod.status.conditions if c.type in gates} != \
                {c.type: c.status for c in last.conditions if c.type in gates}
        return False

    async def _on_pod_deleted(self, pod: Pod) -> None:
        self.workers.update(pod, deleted=True)

    def _on_pleg(self, uid: str, states: dict[str, int]) -> None:
        if self._seen.get(uid) == states:
            return  # the change the PLEG saw is the worker's own, and it has seen it already
        log.debug("PLEG: pod %s changed in the runtime", uid)
        self.workers.wake(uid)

    # ---- one pod ----

    def _inputs(self, **kw: Any) -> StatusInputs:
        return StatusInputs(node_ip=self.config.node_ip, runtime_name=self.runtime_name,
                            ready=self.probes.verdicts(READINESS), started=self.probes.verdicts(STARTUP), **kw)

    async def _sync_pod(self, pod: Pod, deleted: bool) -> Outcome:
        """One sync, traced: a pod being started (or stopped) continues the trace its
        Create began; routine syncs of a running pod are not traced."""
        starting = pod.status.phase in ("", "Pending") or pod.metadata.HasField("deletionTimestamp") or deleted
        if not starting:
            return await self._sync(pod, deleted)
        with _TRACER.start_as_current_span("syncPod", context=pod_context(pod.metadata.annotations),
                                           attributes=pod_attributes(pod, self.config.node_name)):
            return await self._sync(pod, deleted)

    async def _sync(self, pod: Pod, deleted: bool) -> Outcome:
        where = f"{pod.metadata.namespace}/{pod.metadata.name}"
        uid = pod.metadata.uid
        if deleted or pod.metadata.HasField("deletionTimestamp"):
            if await self._terminate(pod, deleted):
                return Outcome(done=True)
            return Outcome(retry_after=2.0)  # volumes still mounted: the deletion waits for them
        runtime = self.runtime
        assert runtime is not None
        last = self.status.last(uid)
        evicted = self._evicted.get(uid)
        if evicted is not None and pod.status.phase not in TERMINAL and (last is None or last.phase not in TERMINAL):
            # Evicted (the node short of a resource, or an emptyDir past its sizeLimit):
            # stopped, and Failed with the reason and upstream's DisruptionTarget condition.
            message, grace = evicted
            state = await runtime.pod_status(uid)
            await self.syncer.kill_pod(pod, state, grace if grace is not None else grace_period(pod))
            status = generate_pod_status(pod, await runtime.pod_status(uid), self._inputs(terminal=True), old=last)
            status.phase, status.reason, status.message = "Failed", "Evicted", message
            status.conditions.add(type="DisruptionTarget", status="True", reason="TerminationByKubelet",
                                  message=message, lastTransitionTime=timestamps.now())
            await self.status.set_status(pod, status)
            self.probes.forget(uid)
            return Outcome()
        deadline_left = self._active_deadline_left(pod, last)
        if deadline_left is not None and deadline_left <= 0 and pod.status.phase not in TERMINAL and \
                (last is None or last.phase not in TERMINAL):
            # upstream's activeDeadlineHandler: the pod ran longer than spec.activeDeadlineSeconds
            message = "Pod was active on the node longer than the specified deadline"
            self.recorder.pod_event(pod, "Normal", "DeadlineExceeded", message)
            state = await runtime.pod_status(uid)
            await self.syncer.kill_pod(pod, state, grace_period(pod))
            status = generate_pod_status(pod, await runtime.pod_status(uid), self._inputs(terminal=True), old=last)
            status.phase, status.reason, status.message = "Failed", "DeadlineExceeded", message
            await self.status.set_status(pod, status)
            self.probes.forget(uid)
            return Outcome()
        if pod.status.phase in TERMINAL or (last is not None and last.phase in TERMINAL):
            # Done: nothing runs again; what is left stays for logs until the pod is deleted.
            state = await runtime.pod_status(uid)
            if any(c.state == RUNNING for c in state.containers) or state.ready_sandbox is not None:
                await self.syncer.kill_pod(pod, state, grace_period(pod))
            self.probes.forget(uid)
            return Outcome()
        if last is None and pod.status.phase in ("", "Pending") and \
                (rejection := forbidden_sysctl(pod, self.config.allowed_unsafe_sysctls)):
            # The kubelet's admission (upstream's rejectPod): Failed before anything runs.
            log.warning("pod %s: rejected: %s", where, rejection)
            self.recorder.pod_event(pod, "Warning", FORBIDDEN_REASON, rejection)
            await self.status.set_status(pod, core_pb2.PodStatus(
                phase="Failed", reason=FORBIDDEN_REASON, message=f"Pod was rejected: {rejection}",
                qosClass=qos_class(pod), conditions=list(pod.status.conditions)))
            return Outcome()
        if last is None and pod.status.phase in ("", "Pending") and not pod.status.containerStatuses and \
                (rejection := self._pressure_rejection(pod)):
            log.warning("pod %s: rejected: %s", where, rejection)
            self.recorder.pod_event(pod, "Warning", "Evicted", rejection)
            await self.status.set_status(pod, core_pb2.PodStatus(
                phase="Failed", reason="Evicted", message=f"Pod was rejected: {rejection}",
                qosClass=qos_class(pod), conditions=list(pod.status.conditions)))
            return Outcome()
        if last is None and pod.status.phase in ("", "Pending") and not pod.status.containerStatuses:
            # First sight of the pod: say so before the sandbox and the images take their
            # time (containers waiting, ContainerCreating), as upstream's SyncPod does. The
            # runtime has nothing of a pod never seen: no need to ask it.
            initial = generate_pod_status(pod, PodRuntimeStatus(uid), self._inputs(), old=None)
            await self.status.set_status(pod, initial)
        try:
            await self.volumes.ensure(pod)
            await self.volume_manager.set_up(pod)
        except MountError as err:
            log.warning("pod %s: %s", where, err)
            if self._mount_errors.get(uid) != str(err):  # told once per cause, not at every retry
                self._mount_errors[uid] = str(err)
                self.recorder.pod_event(pod, "Warning", "FailedMount", f"MountVolume.SetUp failed: {err}")
            return Outcome(retry_after=2.0)
        self._mount_errors.pop(uid, None)
        result = await self.syncer.sync(pod)
        self._seen[uid] = result.runtime.states()
        self.probes.sync(pod, result.runtime)
        status = generate_pod_status(pod, result.runtime, self._inputs(waiting=result.waiting, resize=result.resize),
                                     old=last)
        if await self.status.set_status(pod, status) is None:
            log.info("pod %s: gone from the API while syncing", where)
        if status.phase in TERMINAL:
            log.info("pod %s: %s", where, status.phase)
            self.workers.wake(uid)  # once more: stop what is left
        elif result.ended_meanwhile():
            self.workers.wake(uid)  # act on the exit (restart, back-off) as a PLEG event would have
        now = time.monotonic()
        if now - self._last_gc.get(uid, 0.0) >= self.config.container_gc_period:
            # Not at every sync: a status just written may still name the dead container
            # (`logs --previous` reads it), as upstream's GC runs once a minute.
            self._last_gc[uid] = now
            await self._collect_garbage(pod, result.runtime)
        if deadline_left is not None and deadline_left > 0:
            result.hold(deadline_left)  # woken when the deadline passes
        return Outcome(retry_after=result.retry_after)

    @staticmethod
    def _active_deadline_left(pod: Pod, last: core_pb2.PodStatus | None) -> float | None:
        """Seconds until spec.activeDeadlineSeconds runs out, counted from the pod's
        startTime (None: no deadline, or not started)."""
        if not pod.spec.HasField("activeDeadlineSeconds"):
            return None
        status = last if last is not None and last.HasField("startTime") else pod.status
        if not status.HasField("startTime"):
            return None
        return status.startTime.seconds + pod.spec.activeDeadlineSeconds - time.time()

    async def _terminate(self, pod: Pod, deleted: bool) -> bool:
        """Stop the pod with its grace period, write its final status, remove it from the
        runtime, take its volumes down, then confirm the deletion to the apiserver (grace
        0). False: a volume is still mounted (retried; the pod object stays, as upstream's
        kubelet keeps it until its volumes are gone)."""
        runtime, client = self.runtime, self.client
        assert runtime is not None and client is not None
        uid = pod.metadata.uid
        where = f"{pod.metadata.namespace}/{pod.metadata.name}"
        self.probes.forget(uid)
        state = await runtime.pod_status(uid)
        grace = grace_period(pod)
        log.info("pod %s: terminating (grace %ds)", where, grace)
        await self.syncer.kill_pod(pod, state, grace)
        if not deleted:
            state = await runtime.pod_status(uid)
            status = generate_pod_status(pod, state, self._inputs(terminal=True), old=self.status.last(uid))
            await self.status.set_status(pod, status)
        await self.syncer.remove_pod(uid)
        if not await self.volume_manager.remove_pod_dir(uid):
            return False
        if not deleted:
            try:
                await client.pods.delete(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0, uid=uid)
            except (errors.NotFound, errors.Conflict):
                pass  # gone already, or a new pod of the same name
        self.status.forget(uid)
        self.volumes.forget(uid)
        self._last_gc.pop(uid, None)
        self._seen.pop(uid, None)
        self._mount_errors.pop(uid, None)
        self._evicted.pop(uid, None)
        log.info("pod %s: terminated and removed", where)
        return True

    async def _collect_garbage(self, pod: Pod, state: PodRuntimeStatus) -> None:
        """Dead containers beyond the newest dead one per name go (upstream's
        maxPerPodContainer 1: its status and logs stay), then
        sandboxes that are neither the newest nor hold any container."""
        runtime = self.runtime
        assert runtime is not None
        removed = set()
        kept_dead: set[tuple[str, bool]] = set()
        for c in state.containers:  # newest first
            if c.state != EXITED:
                continue
            key = (c.name, c.init)
            if key not in kept_dead:
                kept_dead.add(key)  # the last run: lastState and `logs --previous` read it
                continue
            try:
                await runtime.remove_container(c.id)
                removed.add(c.id)
            except CRICallError as exc:
                log.debug("gc: container %s: %s", c.id[:13], exc)
        if len(state.sandboxes) > 1:
            holding = {c.id for c in state.containers} - removed
            in_use = {cs.pod_sandbox_id for cs in await runtime.list_containers(pod.metadata.uid)
                      if cs.id in holding}
            for sandbox in state.sandboxes[1:]:
                if not sandbox.ready and sandbox.id not in in_use:
                    try:
                        await runtime.remove_sandbox(sandbox.id)
                    except CRICallError as exc:
                        log.debug("gc: sandbox %s: %s", sandbox.id[:13], exc)

    # ---- housekeeping ----

    async def _collect_images(self) -> None:
        await self._image_gc.collect()

    def _fits(self, pod: Pod) -> tuple[str, str] | None:
        """Whether the node can take the pod's (resized) requests: None, or upstream's
        (Infeasible | Deferred, message) for PodResizePending."""
        others = [p for p in self.informer.store.list() if p.metadata.uid != pod.metadata.uid and
                  p.status.phase not in TERMINAL and not p.metadata.HasField("deletionTimestamp")]
        for resource in ("cpu", "memory"):
            unit = 1000 if resource == "memory" else 1  # millicores; bytes (from milli-bytes)
            capacity = parse_quantity(self.allocatable.get(resource, "0")).milli_value() // unit
            wanted = _requests(pod, resource) // unit
            if wanted > capacity:
                return "Infeasible", (f"Node didn't have enough capacity: {resource}, requested: {wanted}, "
                                      f"capacity: {capacity}")
            used = sum(_requests(p, resource) for p in others) // unit
            if used + wanted > capacity:
                return "Deferred", (f"Node didn't have enough resource: {resource}, requested: {wanted}, "
                                    f"used: {used}, capacity: {capacity}")
        return None

    def _disk_space_failed(self, message: str) -> None:
        node = self.node.node if self.node is not None else None
        if node is not None:
            self.recorder.object_event(node, "v1", "Node", "Warning", "FreeDiskSpaceFailed", message)

    def _pressure_rejection(self, pod: Pod) -> str:
        """upstream's eviction admission: under memory pressure a BestEffort pod is not
        taken, under disk or PID pressure no pod is (critical pods always are)."""
        pressure = self.eviction.pressure()
        if not pressure or pod.spec.priority >= CRITICAL_PRIORITY:
            return ""
        if pressure == {"MemoryPressure"} and qos_class(pod) != "BestEffort":
            return ""
        return f"The node had condition: [{', '.join(sorted(pressure))}]. "

    async def _evict(self) -> None:
        """The eviction manager's pass: observe, judge, and evict one pod when a threshold
        is met (the next pass, if it still is, takes the next)."""
        runtime = self.runtime
        assert runtime is not None
        observed = await asyncio.to_thread(observe, self.paths.pods_dir, runtime_config(self.config).image_root)
        met = self.eviction.judge(observed)
        if not met:
            return
        active = [p for p in self.informer.store.list() if p.status.phase not in TERMINAL and
                  not p.metadata.HasField("deletionTimestamp") and p.metadata.uid not in self._evicted]
        usage: dict[str, PodUsage] = {}
        resource = self.eviction.resource_short(met)
        if resource == "memory":
            for stats in await runtime.list_pod_stats():
                usage[stats.attributes.metadata.uid] = PodUsage(
                    stats.linux.memory.working_set_bytes.value,
                    {c.attributes.metadata.name: c.memory.working_set_bytes.value for c in stats.linux.containers})
        elif resource == "ephemeral-storage":
            for pod in active:  # what the pod wrote on the node: its emptyDirs and its logs
                written = [self.paths.pods_dir / pod.metadata.uid / "volumes" / EMPTY_DIR, self.paths.log_dir(pod)]
                usage[pod.metadata.uid] = PodUsage(sum([await asyncio.to_thread(disk_usage, d) for d in written]))
        chosen = self.eviction.choose(met, active, usage)
        if chosen is None:
            log.warning("eviction thresholds met (%s) and no pod to evict",
                        ", ".join(t.signal for t, _ in met))
            return
        pod = chosen.pod
        log.warning("pod %s/%s: evicted: %s", pod.metadata.namespace, pod.metadata.name, chosen.message)
        self._evicted[pod.metadata.uid] = (chosen.message, chosen.grace)
        self.recorder.pod_event(pod, "Warning", "Evicted", chosen.message)
        self.workers.wake(pod.metadata.uid)

    async def _local_storage_eviction(self) -> None:
        """Upstream's eviction manager for local storage: a pod whose emptyDir on disk holds
        more than its sizeLimit is evicted (a Memory emptyDir is bounded by its tmpfs)."""
        for pod in self.informer.store.list():
            uid = pod.metadata.uid
            if uid in self._evicted or pod.status.phase in TERMINAL or pod.metadata.HasField("deletionTimestamp"):
                continue
            for volume in pod.spec.volumes:
                source = volume.emptyDir
                if not volume.HasField("emptyDir") or source.medium == "Memory" or not source.HasField("sizeLimit"):
                    continue
                try:
                    limit = parse_quantity(source.sizeLimit).int_value()
                except QuantityError:
                    continue
                used = await asyncio.to_thread(disk_usage, self.paths.volume_dir(pod, EMPTY_DIR, volume.name))
                if used > limit:
                    message = f'Usage of EmptyDir volume "{volume.name}" exceeds the limit "{source.sizeLimit}". '
                    log.warning("pod %s/%s: evicted: %s", pod.metadata.namespace, pod.metadata.name, message)
                    self._evicted[uid] = (message, None)
                    self.recorder.pod_event(pod, "Warning", "Evicted", message)
                    self.workers.wake(uid)
                    break

    async def _housekeeping(self) -> None:
        """Pods the runtime has but the API does not (deleted while the kubelet was down,
        or force-deleted): stopped and removed."""
        if not self.informer.synced:
            return
        snapshot = self.pleg.last
        if snapshot is None:
            return
        wanted = {p.metadata.uid for p in self.informer.store.list()}
        for uid in snapshot.states.keys() - wanted - self.workers.uids():
            namespace, name = snapshot.pod_names.get(uid, ("?", "?"))
            log.info("pod %s/%s (%s): not in the API any more; removing it from the runtime", namespace, name, uid)
            try:
                await self.syncer.remove_pod(uid)
            except CRICallError as exc:
                log.warning("pod %s/%s: cleanup failed (retried): %s", namespace, name, exc)
        await self._local_storage_eviction()
        # Pod directories of pods gone from both (deleted while the kubelet was down):
        # their volumes down, then the directories (upstream's cleanupOrphanedPodDirs).
        await self.volume_manager.clean_orphans(wanted | self.workers.uids())
        self.syncer.backoff.gc()
        self.syncer.pull_backoff.gc()
