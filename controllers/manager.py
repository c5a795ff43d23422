"""The controller manager: shared informers (one per resource, for every controller),
leader election on kube-system/kube-controller-manager (the informers stay warm on a
standby; only the leader's controllers act), and each controller's loop or workers:
node lifecycle, NoExecute taint eviction, ReplicaSet, ReplicationController, Deployment,
DaemonSet, StatefulSet, Job, CronJob, HorizontalPodAutoscaler, disruption
(PodDisruptionBudget status), resource quota, EndpointSlice, Endpoints, the service
load balancer (addresses for type LoadBalancer Services), ClusterRole
aggregation and the garbage collector (which follows custom resources too), the
persistent volume binder and the pvc- and pv-protection controllers, the attach/detach
controller."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from controllers.attachdetach import AttachDetachController
from controllers.bootstrapsigner import BootstrapSigner
from controllers.clusterroleaggregation import ClusterRoleAggregationController
from controllers.cronjob import CronJobController
from controllers.csrapproving import CSRApprovingController
from controllers.csrcleaner import POLLING_INTERVAL as CSR_POLLING_INTERVAL
from controllers.csrcleaner import CSRCleaner
from controllers.csrsigning import Authority, CSRSigningController
from controllers.customresources import CustomResourceFollower
from controllers.daemonset import DaemonSetController
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.endpoints import EndpointsController
from controllers.endpointslice import EndpointSliceController
from controllers.garbagecollector import GarbageCollector, Watched
from controllers.job import JobController
from controllers.nodelifecycle import LEASE_NAMESPACE, NodeLifecycleController
from controllers.persistentvolume import PersistentVolumeController
from controllers.podautoscaler import SYNC_PERIOD, HorizontalController
from controllers.replicaset import REPLICATION_CONTROLLER, ReplicaSetController
from controllers.resourcequota import SYNC_PERIOD as QUOTA_SYNC_PERIOD
from controllers.resourcequota import ResourceQuotaController
from controllers.rootcacertpublisher import ROOT_CA_CONFIGMAP, RootCACertPublisher
from controllers.servicelb import ServiceLBController
from controllers.statefulset import StatefulSetController
from controllers.tainteviction import TaintEviction
from controllers.tokencleaner import TokenCleaner
from controllers.volumeprotection import PVCProtectionController, PVProtectionController
from kubeling import bootstraptoken, scheme
from kubeling.client import Client
from kubeling.events import EventRecorder
from kubeling.http import StatusServer
from kubeling.informer import Informer, SharedInformers
from kubeling.leaderelection import ElectionConfig, LeaderElector
from kubeling.options import ConfigError, flag
from kubeling.periodic import Periodic
from kubeling.workqueue import Workers

__all__ = ["ManagerConfig", "ControllerManager", "GC_IGNORED"]

log = logging.getLogger(__name__)

GC_IGNORED = frozenset({scheme.EVENTS})


@dataclass
class ManagerConfig:
    """The controller manager's settings; those with a flag are declared with it."""

    node_monitor_grace_period: float = flag(40.0, "seconds without a heartbeat before a node is Unknown (default "
                                            "%(default)s)", type=float)  # upstream's defaults
    node_monitor_period: float = flag(5.0, "seconds between node health passes (default %(default)s)", type=float)
    eviction_period: float = 1.0  # how often NoExecute evictions are looked for
    leader_elect: bool = True
    election: ElectionConfig = field(default_factory=lambda: ElectionConfig(name="kube-controller-manager"))
    metrics_listen: str = flag("", "HTTP address for /metrics, /healthz, /readyz (default: off)")
    job_backoff_base: float = 10.0  # a failed Job pod is replaced after 10 s, doubling (upstream's)
    horizontal_pod_autoscaler_sync_period: float = flag(SYNC_PERIOD, "seconds between a HorizontalPodAutoscaler's "
                                                        "syncs (default %(default)s)", type=float)
    workers: int = 3  # per controller, as upstream's --concurrent-*-syncs
    resource_quota_sync_period: float = flag(QUOTA_SYNC_PERIOD, "seconds between recounts of every quota's usage "
                                             "(default %(default)s)", type=float)
    disable_service_lb: bool = flag(False, "leave Services of type LoadBalancer to another load balancer "
                                    "controller (MetalLB, a cloud's)", action="store_true")
    service_lb_class: str = flag("", "the service load balancer also serves LoadBalancer Services of this "
                                 "loadBalancerClass (default: only those of none)")
    root_ca_file: Path | None = flag(None, "the cluster CA published as the kube-root-ca.crt ConfigMap in every "
                                     "namespace (default: none published)", type=Path)
    cluster_signing_cert_file: Path | None = flag(None, "the CA certificate (PEM) that signs approved "
                                                  "CertificateSigningRequests of kubernetes.io's signers (default: "
                                                  "none signed)", type=Path)
    cluster_signing_key_file: Path | None = flag(None, "its private key (PEM)", type=Path)
    approve_kubelet_serving_certificates: str = flag(
        "", "approve a node's own kubelet-serving CertificateSigningRequests whose addresses lie in these CIDRs, "
            "comma-separated (kubeling's policy; default: none, a person approves them)")
    cluster_signing_duration: float = flag(365 * 24 * 3600.0, "seconds the certificates it signs are valid at most "
                                           "(default %(default)s: a year, upstream's 8760h)", type=float)


def _networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(c.strip()) for c in text.split(",") if c.strip())
    except ValueError as err:
        raise ConfigError(f"--approve-kubelet-serving-certificates: {err}") from None


def _signing_authority(config: ManagerConfig) -> Authority | None:
    cert, key = config.cluster_signing_cert_file, config.cluster_signing_key_file
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("--cluster-signing-cert-file and --cluster-signing-key-file go together")
    if config.cluster_signing_duration < 600:
        raise ConfigError("--cluster-signing-duration: must be at least 600 seconds")
    try:
        return Authority.from_files(cert, key)
    except (OSError, ValueError, TypeError) as err:
        raise ConfigError(f"--cluster-signing-cert-file/--cluster-signing-key-file: {err}") from None


class ControllerManager:
    def __init__(self, client: Client, config: ManagerConfig | None = None, identity: str = "") -> None:
        self.client = client
        self.config = config = config or ManagerConfig()
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.informers = informers = SharedInformers(client)
        self.nodes = informers.get(scheme.NODES)
        self.pods = informers.get(scheme.PODS)
        self.leases = informers.get(scheme.LEASES, LEASE_NAMESPACE)
        self.replicasets = informers.get(scheme.REPLICASETS)
        self.deployments = informers.get(scheme.DEPLOYMENTS)
        self.jobs = informers.get(scheme.JOBS)
        self.daemonsets = informers.get(scheme.DAEMONSETS)
        self.revisions = informers.get(scheme.CONTROLLERREVISIONS)
        self.statefulsets = informers.get(scheme.STATEFULSETS)
        self.cronjobs = informers.get(scheme.CRONJOBS)
        self.pdbs = informers.get(scheme.POD_DISRUPTION_BUDGETS)
        self.services = informers.get(scheme.SERVICES)
        self.endpointslices = informers.get(scheme.ENDPOINTSLICES)
        self.endpoints = informers.get(scheme.ENDPOINTS)
        self.volumes = informers.get(scheme.PERSISTENTVOLUMES)
        self.claims = informers.get(scheme.PERSISTENTVOLUMECLAIMS)
        self.storage_classes = informers.get(scheme.STORAGECLASSES)
        self.recorder = EventRecorder(client, "node-controller", instance=self.identity)
        workload_events = EventRecorder(client, "controller-manager", instance=self.identity)
        self.replicaset = ReplicaSetController(client, self.replicasets, self.pods, workload_events, config.workers)
        self.replication = ReplicaSetController(client, informers.get(scheme.REPLICATIONCONTROLLERS), self.pods,
                                                workload_events, config.workers, kind=REPLICATION_CONTROLLER)
        self.deployment = DeploymentController(client, self.deployments, self.replicasets, self.pods,
                                               workload_events, config.workers)
        self.daemonset = DaemonSetController(client, self.daemonsets, self.pods, self.nodes, self.revisions,
                                             workload_events, config.workers)
        self.statefulset = StatefulSetController(client, self.statefulsets, self.pods, self.claims, self.revisions,
                                                 workload_events, config.workers)
        self.job = JobController(client, self.jobs, self.pods, workload_events, backoff_base=config.job_backoff_base,
                                 workers=config.workers)
        self.horizontal = HorizontalController(client, informers.get(scheme.HORIZONTALPODAUTOSCALERS), self.pods,
                                               EventRecorder(client, "horizontal-pod-autoscaler",
                                                             instance=self.identity),
                                               sync_period=config.horizontal_pod_autoscaler_sync_period,
                                               workers=config.workers)
        self.cronjob = CronJobController(client, self.cronjobs, self.jobs, workload_events, config.workers)
        self.disruption = DisruptionController(client, self.pdbs, self.pods, self.replicasets, self.deployments)
        self.endpointslice = EndpointSliceController(client, self.services, self.pods, self.endpointslices, self.nodes,
                                                     config.workers)
        self.endpoints_controller = EndpointsController(client, self.services, self.pods, self.endpoints,
                                                        config.workers)
        self.service_lb = None if config.disable_service_lb else ServiceLBController(
            client, self.services, self.nodes, self.endpointslices,
            EventRecorder(client, "service-lb-controller", instance=self.identity), config.workers,
            config.service_lb_class)
        # The garbage collector follows every resource, as owner and as dependent, but those
        # upstream's collector ignores (GarbageCollectorController's default ignoredResources).
        self.garbage_collector = GarbageCollector(
            [Watched(rt, informers.get(rt), client.resource(rt)) for rt in scheme.BUILTIN
             if rt not in GC_IGNORED and rt.view_of is None],
            config.workers)
        self.clusterrole_aggregation = ClusterRoleAggregationController(client, informers.get(scheme.CLUSTERROLES))
        self.root_ca_publisher = RootCACertPublisher(
            client, informers.get(scheme.NAMESPACES),
            informers.get(scheme.CONFIGMAPS, field_selector=f"metadata.name={ROOT_CA_CONFIGMAP}"),
            config.root_ca_file.read_text()) if config.root_ca_file is not None else None
        requests = informers.get(scheme.CERTIFICATESIGNINGREQUESTS)
        self.csr_approving = CSRApprovingController(client, requests, config.workers,
                                                    serving_networks=_networks(config.approve_kubelet_serving_certificates))
        authority = _signing_authority(config)
        self.csr_signing = CSRSigningController(client, requests, authority, config.cluster_signing_duration,
                                                config.workers) \
            if authority is not None else None
        self.csr_cleaner = CSRCleaner(client, requests)
        tokens = informers.get(scheme.SECRETS, bootstraptoken.NAMESPACE,
                               field_selector=f"type={bootstraptoken.SECRET_TYPE}")
        self.bootstrap_signer = BootstrapSigner(client, informers.get(
            scheme.CONFIGMAPS, bootstraptoken.CLUSTER_INFO_NAMESPACE,
            field_selector=f"metadata.name={bootstraptoken.CLUSTER_INFO}"), tokens)
        self.token_cleaner = TokenCleaner(client, tokens)
        volume_events = EventRecorder(client, "persistentvolume-controller", instance=self.identity)
        self.persistentvolume = PersistentVolumeController(client, self.volumes, self.claims, self.storage_classes,
                                                           volume_events, config.workers)
        self.attach_detach = AttachDetachController(client, self.pods, self.claims, self.volumes,
                                                    informers.get(scheme.CSIDRIVERS),
                                                    informers.get(scheme.VOLUMEATTACHMENTS), volume_events)
        self.pvc_protection = PVCProtectionController(client, self.claims, self.pods)
        self.pv_protection = PVProtectionController(client, self.volumes)
        # ... and every custom resource, from when its definition is served
        self.custom_resources = CustomResourceFollower(client, informers.get(scheme.CUSTOMRESOURCEDEFINITIONS),
                                                       self.garbage_collector)
        builtin = {rt.group_resource: rt for rt in scheme.BUILTIN if rt.view_of is None}

        def counted(group_resource: str) -> Informer[Any] | None:
            rt = builtin.get(group_resource)
            return informers.get(rt) if rt is not None else self.custom_resources.informer_for(group_resource)

        self.resource_quota = ResourceQuotaController(client, informers.get(scheme.RESOURCEQUOTAS), counted,
                                                      config.workers)
        self._workers: list[Workers] = [c.workers for c in (
            self.replicaset, self.replication, self.deployment, self.daemonset, self.statefulset, self.job,
            self.cronjob, self.horizontal, self.disruption, self.endpointslice, self.endpoints_controller,
            self.garbage_collector, self.clusterrole_aggregation, self.pvc_protection, self.pv_protection,
            self.attach_detach, self.resource_quota, self.csr_approving, self.bootstrap_signer, self.token_cleaner)]
        if self.csr_signing is not None:
            self._workers.append(self.csr_signing.workers)
        if self.root_ca_publisher is not None:
            self._workers.append(self.root_ca_publisher.workers)
        if self.service_lb is not None:
            self._workers.append(self.service_lb.workers)
        self._workers += self.persistentvolume.workers
        self._events = (self.recorder, workload_events, volume_events, self.horizontal.recorder,
                        *([self.service_lb.recorder] if self.service_lb is not None else []))
        self.node_lifecycle = NodeLifecycleController(client, self.nodes, self.leases, self.pods,
                                                      config.node_monitor_grace_period)
        self.eviction = TaintEviction(client, self.nodes, self.pods, self.recorder)
        self._loops = [Periodic("node-lifecycle", config.node_monitor_period, self.node_lifecycle.monitor),
                       Periodic("taint-eviction", config.eviction_period, self.eviction.sync),
                       # upstream's binder resyncs every 15 s: a claim may wait on any change
                       Periodic("persistentvolume-resync", 15.0, self.persistentvolume.resync_step),
                       Periodic("resourcequota-resync", config.resource_quota_sync_period,
                                self.resource_quota.resync_step),
                       Periodic("csrcleaner", CSR_POLLING_INTERVAL, self.csr_cleaner.clean)]
        self.elector = LeaderElector(client, self.identity, config.election, on_started=self._lead,
                                     on_stopped=self._follow) if config.leader_elect else None
        self.registry = CollectorRegistry()
        self._leader = Gauge("leader_election_master_status", "1 while this replica leads.", registry=self.registry)
        self.status = StatusServer(self.registry, self._ready)
        self._election: asyncio.Task[None] | None = None
        self.leading = False

    def _ready(self) -> tuple[bool, str]:
        if not self.informers.synced:
            return False, "informers not synced"
        return True, "leader" if self.leading else "standby"

    async def start(self, sync_timeout: float = 60.0) -> None:
        if self.config.metrics_listen:
            await self.status.start(self.config.metrics_listen)
        await self.informers.start(sync_timeout)
        if self.elector is not None:
            self._election = asyncio.create_task(self.elector.run(), name="leader-election")
        else:
            await self._lead()

    async def _lead(self) -> None:
        log.info("controller manager %s leads", self.identity)
        self.leading = True
        self._leader.set(1)
        for loop in self._loops:
            loop.start()
        for workers in self._workers:
            workers.start()

    async def _follow(self) -> None:
        self.leading = False
        self._leader.set(0)
        for loop in self._loops:
            await loop.stop()
        for workers in self._workers:
            await workers.stop()

    async def stop(self, *, release: bool = True) -> None:
        if self._election is not None:
            self._election.cancel()
            try:
                await self._election
            except (asyncio.CancelledError, Exception):
                pass
        await self._follow()
        if release and self.elector is not None:
            try:
                async with asyncio.timeout(5):
                    await self.elector.release()
            except Exception as err:  # noqa: BLE001 (the lease then expires by itself)
                log.info("lease not released: %s", err)
        for recorder in self._events:
            try:
                async with asyncio.timeout(5):
                    await recorder.flush()
            except TimeoutError:
                pass
        await self.custom_resources.stop()
        await self.informers.stop()
        await self.status.stop()
        await self.client.close()
