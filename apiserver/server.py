"""The apiserver process: etcd storage, a registry and watch cache per resource,
the gRPC services (plus health and reflection), compaction, and an HTTP endpoint
for /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cryptography.hazmat.primitives.asymmetric import ec
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from apiserver.admission.chain import Admission, AdmissionPlugin, MutatingPlugin
from apiserver.admission.defaulttolerationseconds import DefaultTolerationSeconds
from apiserver.admission.noderestriction import NodeRestriction
from apiserver.admission.priority import PriorityAdmission
from apiserver.admission.rbac_escalation import EscalationCheck
from apiserver.admission.serviceaccount import ServiceAccountAdmission
from apiserver.auth.authentication import Authenticator, load_token_file
from apiserver.auth.authorization import authorizer_for, parse_modes
from apiserver.auth.rbac_policy import StoredPolicy, reconcile_bootstrap
from apiserver.auth.tokens import DEFAULT_ISSUER, ServiceAccountTokens, TokenIssuer, load_signing_key
from apiserver.controllers.election import Controller, ControllerElection
from apiserver.controllers.kubernetes_service import KubernetesService
from apiserver.controllers.namespace_finalizer import NamespaceFinalizer
from apiserver.controllers.nodeipam import CIDRAllocator, NodeIPAM
from apiserver.controllers.serviceaccounts import ServiceAccountsController
from apiserver.endpoints.grpc.handlers import SERVICE_NAMES, service_handler
from apiserver.endpoints.metrics import Metrics
from apiserver.endpoints.rest.server import RestServer
from apiserver.registry import ALL_STRATEGIES
from apiserver.registry.core.allocator import IPRange, PortRange, RangeAllocator
from apiserver.registry.core.namespaces import SYSTEM_NAMESPACES
from apiserver.registry.core.pod_eviction import Evictions
from apiserver.registry.core.pod_location import PodLocator
from apiserver.registry.core.pod_log import PodLogProxy
from apiserver.registry.core.pod_streams import PodStreams
from apiserver.registry.core.service_allocation import AllocationRepair, ServiceAllocations
from apiserver.registry.core.serviceaccount_token import TokenRequests
from apiserver.registry.generic.store import Registry
from apiserver.registry.metrics import MetricsAPI
from apiserver.registry.scheduling import bootstrap_priority_classes
from apiserver.storage.compaction import Compactor
from apiserver.storage.etcd import EtcdTLS, Storage
from apiserver.storage.ttl import LeasePool
from kubeling import errors
from kubeling.http import StatusServer
from kubeling.servingtls import ServingTLS, client_context
from protos.kubeling.v1 import api_pb2, core_pb2

__all__ = ["APIServer", "Config"]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 3 * 1024 * 1024  # kube-apiserver's default request body limit


@dataclass
class Config:
    etcd: str = "127.0.0.1:2379"
    listen: str = "127.0.0.1:6443"
    metrics_listen: str = ""  # host:port for /metrics, /healthz, /readyz; empty: off
    rest_listen: str = ""  # host:port for the Kubernetes REST API (kubectl); empty: off
    etcd_prefix: str = "/registry"
    compaction_interval: float = 300.0  # seconds; 0 disables
    bookmark_interval: float = 60.0
    watch_cache_size: int = 10_000  # events kept per resource
    watcher_buffer: int = 1_000  # events a watcher may lag before it is ended
    namespace_finalize_interval: float = 1.0
    etcd_wait: float = 30.0  # seconds to wait for etcd at start before giving up
    event_ttl: float = 3600.0  # Events are removed this long after their last write
    cluster_cidr: str = "10.88.0.0/16"  # nodes' pod CIDRs come out of it; empty: not allocated
    node_cidr_mask_size: int = 24
    # Services' ClusterIPs and node ports come out of these (never overlapping cluster_cidr).
    service_cluster_ip_range: str = "10.96.0.0/16"
    service_node_port_range: str = "30000-32767"
    # The address the `kubernetes` Service's endpoints name (empty: the REST listener's host).
    advertise_address: str = ""
    advertise_port: int = 0  # their port (0: the REST port)
    allocation_repair_interval: float = 60.0
    # Serving TLS for gRPC and REST (both files, or neither: plain text), client
    # certificates verified against client_ca_file; static tokens; anonymous requests.
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    client_ca_file: str = ""
    token_auth_file: str = ""
    anonymous_auth: bool = True
    authorization_mode: str = "AlwaysAllow"  # a comma-separated list of AlwaysAllow, Node, RBAC
    # comma-separated; "": none
    admission_plugins: str = "NodeRestriction,ServiceAccount,DefaultTolerationSeconds,Priority"
    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300
    # ServiceAccount tokens: signed with this ECDSA P-256 key (kubeling.pki's sa.key; empty:
    # a key made at start, so tokens die with the process), for this issuer and audiences.
    service_account_signing_key_file: str = ""
    service_account_issuer: str = DEFAULT_ISSUER
    api_audiences: str = ""  # comma-separated; empty: the issuer
    # To the kubelets: HTTPS with this client certificate, their serving certificates
    # verified against the CA (all three, or none: plain HTTP).
    kubelet_client_certificate: str = ""
    kubelet_client_key: str = ""
    kubelet_certificate_authority: str = ""
    # To etcd: TLS with this client certificate, etcd's verified against the CA (all three, or none).
    etcd_cafile: str = ""
    etcd_certfile: str = ""
    etcd_keyfile: str = ""

    def serving_tls(self) -> ServingTLS | None:
        if bool(self.tls_cert_file) != bool(self.tls_private_key_file):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        if self.client_ca_file and not self.tls_cert_file:
            raise ValueError("--client-ca-file needs --tls-cert-file: client certificates come with TLS")
        if not self.tls_cert_file:
            return None
        tls = ServingTLS(Path(self.tls_cert_file), Path(self.tls_private_key_file),
                         Path(self.client_ca_file) if self.client_ca_file else None)
        tls.check()
        return tls

    def authenticator(self) -> Authenticator:
        try:
            tokens = load_token_file(Path(self.token_auth_file)) if self.token_auth_file else {}
        except OSError as err:
            raise ValueError(f"--token-auth-file: {err}") from None
        return Authenticator(tokens, self.anonymous_auth)

    def kubelet_ssl(self) -> ssl.SSLContext | None:
        files = (self.kubelet_client_certificate, self.kubelet_client_key, self.kubelet_certificate_authority)
        if not any(files):
            return None
        if not all(files):
            raise ValueError("--kubelet-client-certificate, --kubelet-client-key and "
                             "--kubelet-certificate-authority go together")
        return client_context(Path(self.kubelet_certificate_authority), Path(self.kubelet_client_certificate),
                              Path(self.kubelet_client_key))

    def token_issuer(self) -> TokenIssuer:
        if self.service_account_signing_key_file:
            try:
                key = load_signing_key(Path(self.service_account_signing_key_file).read_bytes())
            except (OSError, ValueError) as err:
                raise ValueError(f"--service-account-signing-key-file: {err}") from None
        else:
            log.warning("no --service-account-signing-key-file: ServiceAccount tokens are signed with a key made "
                        "now, and die with this process")
            key = ec.generate_private_key(ec.SECP256R1())
        audiences = tuple(a.strip() for a in self.api_audiences.split(",") if a.strip()) or \
            (self.service_account_issuer,)
        return TokenIssuer(key, self.service_account_issuer, audiences)

    def etcd_tls(self) -> EtcdTLS | None:
        files = (self.etcd_cafile, self.etcd_certfile, self.etcd_keyfile)
        if not any(files):
            return None
        if not all(files):
            raise ValueError("--etcd-cafile, --etcd-certfile and --etcd-keyfile go together")
        try:
            ca, cert, key = (Path(f).read_bytes() for f in files)
        except OSError as err:
            raise ValueError(f"etcd TLS: {err}") from None
        return EtcdTLS(ca, cert, key)

    def service_ranges(self) -> tuple[IPRange, PortRange]:
        try:
            ips = IPRange.parse(self.service_cluster_ip_range)
        except ValueError as err:
            raise ValueError(f"--service-cluster-ip-range: {err}") from None
        if ips.size < 8:
            raise ValueError(f"--service-cluster-ip-range {ips.text} is too small")
        if self.cluster_cidr and ips.cidr.overlaps(ipaddress.ip_network(self.cluster_cidr)):
            raise ValueError(f"--service-cluster-ip-range {ips.text} overlaps --cluster-cidr {self.cluster_cidr}")
        try:
            ports = PortRange.parse(self.service_node_port_range)
        except ValueError as err:
            raise ValueError(f"--service-node-port-range: {err}") from None
        return ips, ports

    def admission_plugin_names(self) -> list[str]:
        names = [n.strip() for n in self.admission_plugins.split(",") if n.strip()]
        for name in names:
            if name not in ADMISSION_PLUGINS:
                raise ValueError(f"--enable-admission-plugins: {name!r} is not one of {', '.join(ADMISSION_PLUGINS)}")
        return names


ADMISSION_PLUGINS = ("NodeRestriction", "ServiceAccount", "DefaultTolerationSeconds", "Priority")


@dataclass
class APIServer:
    config: Config
    metrics: Metrics = field(default_factory=Metrics)
    port: int = 0
    metrics_port: int = 0
    rest_port: int = 0
    registries: dict[str, Registry[Any]] = field(default_factory=dict)  # by plural
    _storage: Storage | None = None
    _server: grpc.aio.Server | None = None
    _http: StatusServer | None = None
    _rest: RestServer | None = None
    _compactor: Compactor | None = None
    _finalizer: NamespaceFinalizer | None = None
    _service_accounts: ServiceAccountsController | None = None
    _ipam: NodeIPAM | None = None
    _election: ControllerElection | None = None
    _health: health.aio.HealthServicer | None = None

    @property
    def allocates_pod_cidrs(self) -> bool:
        """Whether nodes get pod CIDRs from --cluster-cidr (the node IPAM controller runs)."""
        return self._ipam is not None

    @property
    def address(self) -> str:
        host = self.config.listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.port}"

    @property
    def rest_address(self) -> str:
        host = self.config.rest_listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.rest_port}"

    async def start(self) -> None:
        cfg = self.config
        tls = cfg.serving_tls()  # bad files fail here, before anything is started
        authenticator = cfg.authenticator()
        issuer = cfg.token_issuer()
        modes = parse_modes(cfg.authorization_mode)
        admission_names = cfg.admission_plugin_names()
        kubelet_ssl = cfg.kubelet_ssl()
        etcd_tls = cfg.etcd_tls()
        # gRPC calls are told apart only by certificates or tokens: without either, skip it.
        grpc_authn = authenticator if cfg.client_ca_file or cfg.token_auth_file or not cfg.anonymous_auth \
            or modes != ["AlwaysAllow"] else None
        allocator = CIDRAllocator(cfg.cluster_cidr, cfg.node_cidr_mask_size) if cfg.cluster_cidr else None
        ip_range, port_range = cfg.service_ranges()
        self._storage = storage = await Storage.connect(cfg.etcd, etcd_tls)
        await self._wait_for_etcd(storage)
        for strategy_type in ALL_STRATEGIES:
            strategy = strategy_type()
            self.registries[strategy.plural] = Registry(
                strategy, storage, prefix=cfg.etcd_prefix, cache_capacity=cfg.watch_cache_size,
                bookmark_interval=cfg.bookmark_interval, watcher_buffer=cfg.watcher_buffer,
                namespace_check=self._check_namespace if strategy.namespaced else None,
                expiry=LeasePool(storage, cfg.event_ttl, reuse=min(60.0, cfg.event_ttl))
                if strategy.plural == "events" and cfg.event_ttl > 0 else None)
        prefix = cfg.etcd_prefix.rstrip("/")
        service_ips = RangeAllocator(storage, f"{prefix}/ranges/serviceips".encode(), ip_range)
        node_ports = RangeAllocator(storage, f"{prefix}/ranges/servicenodeports".encode(), port_range)
        self.registries["services"].hooks = ServiceAllocations(service_ips, node_ports)
        policy = StoredPolicy(self.registries)
        authorizer = authorizer_for(cfg.authorization_mode, policy, self._pods_on_node)
        authenticator.others.append(ServiceAccountTokens(
            issuer.key.public_key(), self._cached("serviceaccounts"), self._cached("pods"), issuer.issuer,
            issuer.audiences))
        tokens = TokenRequests(issuer, self.registries["serviceaccounts"], self.registries["pods"])
        evictions = Evictions(self.registries["pods"], self.registries["poddisruptionbudgets"])
        plugins: list[AdmissionPlugin] = [NodeRestriction(self._cached("pods"))] \
            if "NodeRestriction" in admission_names else []
        if authorizer is not None and "RBAC" in modes:
            plugins.append(EscalationCheck(authorizer, policy))  # upstream's RBAC storage does it
        mutating: list[MutatingPlugin] = [ServiceAccountAdmission(self._service_account)] \
            if "ServiceAccount" in admission_names else []
        if "DefaultTolerationSeconds" in admission_names:
            mutating.append(DefaultTolerationSeconds(cfg.default_not_ready_toleration_seconds,
                                                     cfg.default_unreachable_toleration_seconds))
        if "Priority" in admission_names:
            priority = PriorityAdmission(self.registries["priorityclasses"])
            plugins.append(priority)
            mutating.append(priority)
        chain = Admission(plugins, mutating)
        for reg in self.registries.values():
            reg.admission = chain.for_resource(reg.strategy.plural)
        for reg in self.registries.values():
            await reg.start()
        await asyncio.gather(*(reg.wait_ready(timeout=30) for reg in self.registries.values()))
        await self._bootstrap_namespaces()
        await reconcile_bootstrap(self.registries["clusterroles"], self.registries["clusterrolebindings"])
        await bootstrap_priority_classes(self.registries["priorityclasses"])
        self._service_accounts = ServiceAccountsController(self.registries["namespaces"],
                                                           self.registries["serviceaccounts"])
        await self._service_accounts.sync()  # the system namespaces' before anyone asks

        self._server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
            # Long-lived watches: let clients keep idle connections alive with pings.
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
        ])
        locator = PodLocator(self.registries["pods"], self.registries["nodes"], kubelet_ssl)
        pod_logs = PodLogProxy(locator)
        self._server.add_generic_rpc_handlers(
            [service_handler(reg, self.metrics, pod_logs, grpc_authn, authorizer, tokens, evictions)
             for reg in self.registries.values()])
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        names = [api_pb2.DESCRIPTOR.services_by_name[n].full_name for n in SERVICE_NAMES.values()]
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server)
        self.port = self._server.add_secure_port(cfg.listen, tls.grpc_credentials()) if tls is not None \
            else self._server.add_insecure_port(cfg.listen)
        if self.port == 0:
            raise RuntimeError(f"cannot listen on {cfg.listen}")
        await self._server.start()
        for name in ["", *names]:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)

        self._compactor = Compactor(storage, cfg.compaction_interval, self._compacted)
        self._compactor.start()
        self._finalizer = NamespaceFinalizer(
            self.registries["namespaces"],
            [r for r in self.registries.values() if r.strategy.namespaced],
            cfg.namespace_finalize_interval)
        controllers: list[Controller] = [self._finalizer, self._service_accounts]
        if allocator is not None:
            self._ipam = NodeIPAM(self.registries["nodes"], allocator)
            controllers.append(self._ipam)
        controllers.append(AllocationRepair(self.registries["services"], service_ips, node_ports,
                                            cfg.allocation_repair_interval))
        if cfg.metrics_listen:
            await self._start_http(cfg.metrics_listen)
        if cfg.rest_listen:
            self._rest = RestServer(self.registries, pod_logs, PodStreams(locator), self.metrics, self._ready,
                                    authenticator=authenticator, authorizer=authorizer,
                                    ssl_context=tls.ssl_context() if tls is not None else None, tokens=tokens,
                                    evictions=evictions,
                                    metrics_api=MetricsAPI(self.registries["nodes"], self.registries["pods"],
                                                           kubelet_ssl))
            self.rest_port = await self._rest.start(cfg.rest_listen)
            log.info("apiserver serving the REST API on %s", self.rest_address)
            controllers.append(KubernetesService(
                self.registries["services"], self.registries["endpoints"], self.registries["endpointslices"],
                ip_range.value(0), self._advertised(), cfg.advertise_port or self.rest_port))
        # after the listeners: the `kubernetes` Service names the REST port
        self._election = ControllerElection(self.registries["leases"], controllers)
        self._election.start()
        log.info("apiserver serving gRPC on %s (etcd %s)", self.address, cfg.etcd)

    def _advertised(self) -> str:
        """The `kubernetes` Service's endpoint address: --advertise-address, else the REST
        listener's own when it is one address."""
        if self.config.advertise_address:
            return self.config.advertise_address
        host = self.rest_address.rpartition(":")[0].strip("[]")
        try:
            if not ipaddress.ip_address(host).is_unspecified:
                return host
        except ValueError:
            pass
        log.warning("the REST API listens on %s and no --advertise-address is given: the kubernetes Service's "
                    "endpoint is 127.0.0.1, which pods cannot reach", host)
        return "127.0.0.1"

    async def stop(self, grace: float = 1.0) -> None:
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._election is not None:
            await self._election.stop()
        for part in (self._compactor, self._finalizer, self._ipam, self._service_accounts):
            if part is not None:
                await part.stop()
        for reg in self.registries.values():
            await reg.stop()
        if self._rest is not None:
            await self._rest.stop()
        if self._server is not None:
            await self._server.stop(grace)
        if self._http is not None:
            await self._http.stop()
        if self._storage is not None:
            await self._storage.close()

    async def _wait_for_etcd(self, storage: Storage) -> None:
        deadline = time.monotonic() + self.config.etcd_wait
        while True:
            try:
                await storage.revision()
                return
            except errors.ApiError as err:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"etcd at {self.config.etcd} is not reachable after "
                                       f"{self.config.etcd_wait:.0f}s: {err.message}") from None
                log.info("waiting for etcd at %s: %s", self.config.etcd, err.message)
                await asyncio.sleep(0.5)

    def _compacted(self, revision: int) -> None:
        self.metrics.compactions.inc()
        for reg in self.registries.values():
            reg.compacted(revision)

    def _pods_on_node(self, node: str) -> list[core_pb2.Pod]:
        """The watch cache's pods bound to a node (the Node authorizer's graph)."""
        registry = self.registries["pods"]
        items, _ = registry.watch_cache.list(registry.parse_filter("", "", f"spec.nodeName={node}"))
        return items

    def _cached(self, plural: str) -> Callable[[str, str], Any]:
        """(namespace, name) -> the watch cache's object or None (the authenticator's lookups
        are synchronous, as upstream's informer-backed getters)."""
        registry = self.registries[plural]

        def lookup(namespace: str, name: str) -> Any:
            return registry.watch_cache.get(registry.key(namespace, name))
        return lookup

    async def _service_account(self, namespace: str, name: str) -> core_pb2.ServiceAccount | None:
        """The cache's copy, else etcd's (one made a moment ago)."""
        registry = self.registries["serviceaccounts"]
        found = registry.watch_cache.get(registry.key(namespace, name))
        if found is None:
            try:
                found = await registry.get(namespace, name)
            except errors.NotFound:
                return None
        return found

    async def _check_namespace(self, namespace: str) -> None:
        namespaces = self.registries["namespaces"]
        ns = namespaces.watch_cache.get(namespaces.key("", namespace))
        if ns is None:  # the cache may lag a namespace created a moment ago: ask etcd
            try:
                ns = await namespaces.get("", namespace)
            except errors.NotFound:
                raise errors.NotFound(f'namespaces "{namespace}" not found',
                                      metadata={"kind": "Namespace", "name": namespace}) from None
        if ns.metadata.HasField("deletionTimestamp"):
            raise errors.Forbidden(f"unable to create new content in namespace {namespace} "
                                   "because it is being terminated")

    async def _bootstrap_namespaces(self) -> None:
        namespaces = self.registries["namespaces"]
        for name in SYSTEM_NAMESPACES:
            try:
                await namespaces.create(core_pb2.Namespace(metadata={"name": name}))
            except errors.AlreadyExists:
                pass

    def _ready(self) -> tuple[bool, str]:
        if all(r.ready for r in self.registries.values()):
            return True, "ok"
        return False, "watch caches not ready"

    async def _start_http(self, listen: str) -> None:
        self._http = StatusServer(self.metrics.registry, self._ready)
        self.metrics_port = await self._http.start(listen)
