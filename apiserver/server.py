"""The apiserver: etcd storage, a registry and watch cache per scheme entry, the request
pipeline under both front ends (the gRPC services with health and reflection, and the
REST API), the apiserver's own loops under an election, compaction, and an HTTP endpoint
for /metrics, /healthz and /readyz. `start` builds them in named steps, in order."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from apiserver.admission.certificates import CertificateApproval, CertificateSigning, CertificateSubjectRestriction
from apiserver.admission.chain import Admission, AdmissionPlugin, MutatingPlugin
from apiserver.admission.defaulttolerationseconds import DefaultTolerationSeconds
from apiserver.admission.ingressclass import DefaultIngressClass
from apiserver.admission.limitranger import LimitRanger
from apiserver.admission.noderestriction import NodeRestriction
from apiserver.admission.podsecurity import PodSecurityAdmission
from apiserver.admission.policy import ValidatingPolicies
from apiserver.admission.policystatus import PolicyTypeChecker
from apiserver.admission.priority import PriorityAdmission
from apiserver.admission.rbac_escalation import EscalationCheck
from apiserver.admission.resourcequota import ResourceQuotaAdmission
from apiserver.admission.runtimeclass import RuntimeClassAdmission
from apiserver.admission.serviceaccount import ServiceAccountAdmission
from apiserver.admission.storage import DefaultStorageClass, PersistentVolumeClaimResize, StorageObjectInUseProtection
from apiserver.admission.webhook import MutatingWebhooks, ValidatingWebhooks, WebhookClient, WebhookSource
from apiserver.aggregator import AggregatorProxy, APIServiceStatus, LocalAPIServices, ProxyIdentity, RemoteAPIs
from apiserver.aggregator.metrics import AggregatedMetrics
from apiserver.audit import Auditor
from apiserver.auth.authentication import Authenticator
from apiserver.auth.authorization import Authorizer, authorizer_for
from apiserver.auth.bootstraptoken import BootstrapTokens
from apiserver.auth.rbac_policy import StoredPolicy, reconcile_bootstrap
from apiserver.auth.tokens import ServiceAccountTokens
from apiserver.controllers.cluster_authentication import AuthenticationTrust, publish_authentication_trust
from apiserver.controllers.crd_finalizer import CRDFinalizer
from apiserver.controllers.crd_naming import CRDNaming
from apiserver.controllers.election import Controller, ControllerElection
from apiserver.controllers.flowschema_status import FlowSchemaStatus
from apiserver.controllers.kubernetes_service import KubernetesService
from apiserver.controllers.namespace_finalizer import NamespaceFinalizer
from apiserver.controllers.nodeipam import NodeIPAM
from apiserver.controllers.serviceaccounts import ServiceAccountsController
from apiserver.controllers.storage_migration import StorageVersionMigrator
from apiserver.endpoints.grpc.custom import custom_service_handler
from apiserver.endpoints.grpc.handlers import service_handler
from apiserver.endpoints.grpc.podmetrics import SERVICE as METRICS_SERVICE
from apiserver.endpoints.grpc.podmetrics import metrics_service_handler
from apiserver.endpoints.grpc.reviews import SERVICE as AUTHORIZATION_SERVICE
from apiserver.endpoints.grpc.reviews import authorization_service_handler
from apiserver.endpoints.grpc.scale import ScaleMethods
from apiserver.endpoints.metrics import Metrics
from apiserver.endpoints.pipeline import Pipeline
from apiserver.endpoints.request import SubresourceHandler
from apiserver.endpoints.rest.server import RestServer
from apiserver.flowcontrol import FlowControl, ensure_configuration
from apiserver.options import Completed, Config, complete
from apiserver.registry import CONVERSIONS, Strategy, strategy_for
from apiserver.registry.apiextensions.customresources import CustomResourceStrategy
from apiserver.registry.apiextensions.serving import CustomResourceServing
from apiserver.registry.core.allocator import RangeAllocator
from apiserver.registry.core.namespaces import SYSTEM_NAMESPACES
from apiserver.registry.core.pod_binding import bind
from apiserver.registry.core.pod_eviction import Evictions
from apiserver.registry.core.pod_location import PodLocator
from apiserver.registry.core.pod_log import PodLogProxy
from apiserver.registry.core.pod_streams import PodStreams
from apiserver.registry.core.proxy_location import ProxyLocator
from apiserver.registry.core.service_allocation import AllocationRepair, ServiceAllocations
from apiserver.registry.core.serviceaccount_token import TokenRequests
from apiserver.registry.generic.json_strategy import JsonStrategy
from apiserver.registry.generic.store import Registry
from apiserver.registry.generic.view import VersionView
from apiserver.registry.scheduling import bootstrap_priority_classes
from apiserver.storage.compaction import Compactor
from apiserver.storage.encryption import EncryptionConfig
from apiserver.storage.etcd import Storage
from apiserver.storage.maintenance import Defragmenter, Maintenance
from apiserver.storage.selection import Filter
from apiserver.storage.ttl import LeasePool
from kubeling import errors, scheme
from kubeling.http import StatusServer
from kubeling.scheme import ResourceType, Scheme
from protos.kubeling.v1 import api_pb2, authentication_pb2, core_pb2, custom_pb2, meta_pb2, policy_pb2, storage_pb2

__all__ = ["APIServer", "Config"]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 3 * 1024 * 1024  # kube-apiserver's default request body limit

Subresources = dict[tuple[ResourceType[Any], str], SubresourceHandler]


@dataclass
class _Auth:
    """Who may do what: built once the registries exist (the policy and the tokens' lookups read them)."""

    authenticator: Authenticator
    authorizer: Authorizer | None
    policy: StoredPolicy


@dataclass
class APIServer:
    config: Config
    metrics: Metrics = field(default_factory=Metrics)
    port: int = 0
    metrics_port: int = 0
    rest_port: int = 0
    scheme: Scheme = field(default_factory=Scheme.builtin)
    registries: dict[ResourceType[Any], Registry[Any]] = field(default_factory=dict)
    _storage: Storage | None = None
    _server: grpc.aio.Server | None = None
    _http: StatusServer | None = None
    _rest: RestServer | None = None
    _compactor: Compactor | None = None
    _service_accounts: ServiceAccountsController | None = None
    _loops: list[Controller] = field(default_factory=list)
    _election: ControllerElection | None = None
    _health: health.aio.HealthServicer | None = None
    _admission: Admission | None = None
    _crds: CustomResourceServing | None = None
    _webhook_client: WebhookClient | None = None
    _remote_apis: RemoteAPIs | None = None
    _auditor: Auditor | None = None
    _encryption: EncryptionConfig | None = None

    @property
    def allocates_pod_cidrs(self) -> bool:
        """Whether nodes get pod CIDRs from --cluster-cidr (the node IPAM controller runs)."""
        return any(isinstance(c, NodeIPAM) for c in self._loops)

    @property
    def address(self) -> str:
        host = self.config.listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.port}"

    @property
    def rest_address(self) -> str:
        host = self.config.rest_listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.rest_port}"

    async def start(self) -> None:
        """Build and start every part, in order; bad configuration fails first (ConfigError)."""
        options = complete(self.config)
        storage = await self._connect(options)
        self._build_registries(storage, options)
        auth = self._build_auth(options)
        self._build_admission(options, auth)
        await self._start_registries()
        await self._bootstrap()
        await self._serve_custom_resources()
        subresources = self._subresources(options)
        # gRPC: without certificates or tokens, nothing tells callers apart (all anonymous)
        flow_control = self._flow_control()
        self._auditor = options.auditor
        if self._auditor is not None:
            await self._auditor.start()
        grpc_pipeline = Pipeline(self.metrics, auth.authenticator if options.grpc_authenticates else None,
                                 auth.authorizer, flow_control, options.auditor)
        await self._serve_grpc(options, subresources, grpc_pipeline)
        defragmenter = None
        if self.config.etcd_defrag_free_ratio > 0:
            defragmenter = Defragmenter([e.strip() for e in self.config.etcd.split(",") if e.strip()],
                                        Maintenance(options.etcd_tls), self.config.etcd_defrag_free_ratio,
                                        self.config.etcd_defrag_min_free_bytes)
        self._compactor = Compactor(storage, self.config.compaction_interval, self._compacted, defragmenter,
                                    self._defragmented)
        self._compactor.start()
        if self.config.metrics_listen:
            await self._start_http(self.config.metrics_listen)
        if self.config.rest_listen:
            await self._serve_rest(options, subresources, Pipeline(self.metrics, auth.authenticator, auth.authorizer,
                                                                   flow_control, options.auditor))
        self._start_controllers(options)  # after the listeners: the `kubernetes` Service names the REST port
        log.info("apiserver serving gRPC on %s (etcd %s)", self.address, self.config.etcd)

    # ------------------------------------------------------------ build steps

    async def _connect(self, options: Completed) -> Storage:
        self._storage = storage = await Storage.connect(self.config.etcd, options.etcd_tls,
                                                        timeout=self.config.etcd_request_timeout,
                                                        keepalive_ms=int(self.config.etcd_keepalive * 1000),
                                                        keepalive_timeout_ms=int(
                                                            self.config.etcd_keepalive_timeout * 1000))
        await self._wait_for_etcd(storage)
        return storage

    def _build_registries(self, storage: Storage, options: Completed) -> None:
        """A registry per scheme entry, its strategy from the registry's table."""
        cfg = self.config
        self._encryption = options.encryption
        for resource in self.scheme:
            if resource.view_of is None:
                self.registries[resource] = self._new_registry(
                    strategy_for(resource), storage, LeasePool(storage, cfg.event_ttl, reuse=min(60.0, cfg.event_ttl))
                    if resource is scheme.EVENTS and cfg.event_ttl > 0 else None)
        for resource in self.scheme:  # a second version: a view over its storage version's registry
            if resource.view_of is not None:
                to_view, to_storage = CONVERSIONS[resource]
                self.registries[resource] = VersionView(self.registries[resource.view_of], strategy_for(resource),
                                                        to_view, to_storage)
        prefix = cfg.etcd_prefix.rstrip("/")
        self._service_ips = RangeAllocator(storage, f"{prefix}/ranges/serviceips".encode(), options.service_ips)
        self._node_ports = RangeAllocator(storage, f"{prefix}/ranges/servicenodeports".encode(), options.node_ports)
        self.registries[scheme.SERVICES].hooks = ServiceAllocations(self._service_ips, self._node_ports)

    def _new_registry(self, strategy: Strategy[Any], storage: Storage,
                      expiry: LeasePool | None = None) -> Registry[Any]:
        cfg = self.config
        registry: Registry[Any] = Registry(
            strategy, storage, prefix=cfg.etcd_prefix, cache_capacity=cfg.watch_cache_size,
            bookmark_interval=cfg.bookmark_interval, watcher_buffer=cfg.watcher_buffer,
            namespace_check=self._check_namespace if strategy.namespaced else None, expiry=expiry)
        if self._admission is not None:
            registry.admission = self._admission.for_resource(strategy.resource)
        if self._encryption is not None:  # encrypted at rest, as --encryption-provider-config says
            registry.codec.transformer = self._encryption.transformer_for(strategy.resource.group_resource)
        return registry

    def _custom_registry(self, strategy: CustomResourceStrategy) -> Registry[Any]:
        """A registry for a custom resource's served version, made while serving."""
        assert self._storage is not None
        return self._new_registry(strategy, self._storage)

    async def _serve_custom_resources(self) -> None:
        """Custom resources of the definitions stored now, before the front ends open."""
        self._crds = CustomResourceServing(self.registries[scheme.CUSTOMRESOURCEDEFINITIONS], self.scheme,
                                           self.registries, self._custom_registry, self._service_address,
                                           self.config.conversion_webhook_timeout)
        await self._crds.start()

    async def _service_address(self, namespace: str, name: str, port: int) -> str:
        """Where a webhook's Service answers: its ClusterIP and port, as kube-apiserver
        reaches webhooks by default (kube-proxy's rules take it to an endpoint)."""
        try:
            svc = await self.registries[scheme.SERVICES].get(namespace, name)
        except errors.NotFound:
            raise errors.ServiceUnavailable(f'service "{namespace}/{name}" not found') from None
        if not svc.spec.clusterIP or svc.spec.clusterIP == "None":
            raise errors.ServiceUnavailable(f'service "{namespace}/{name}" has no ClusterIP')
        return f"{svc.spec.clusterIP}:{port}"

    def _build_auth(self, options: Completed) -> _Auth:
        policy = StoredPolicy(self.registries)
        authorizer = authorizer_for(self.config.authorization_mode, policy, self._pods_on_node)
        issuer = options.token_issuer
        options.authenticator.others.append(ServiceAccountTokens(
            issuer.key.public_key(), self._cached(scheme.SERVICEACCOUNTS), self._cached(scheme.PODS), issuer.issuer,
            issuer.audiences))
        if self.config.enable_bootstrap_token_auth:
            options.authenticator.others.append(BootstrapTokens(self._cached(scheme.SECRETS)))
        return _Auth(options.authenticator, authorizer, policy)

    def _build_admission(self, options: Completed, auth: _Auth) -> None:
        """The admission chain, in upstream's order, given to every registry."""
        names, cfg = options.admission_plugins, self.config
        plugins: list[AdmissionPlugin] = [NodeRestriction(self._cached(scheme.PODS))] \
            if "NodeRestriction" in names else []
        if auth.authorizer is not None and "RBAC" in options.authorization_modes:
            plugins.append(EscalationCheck(auth.authorizer, auth.policy))  # upstream's RBAC storage does it
        mutating: list[MutatingPlugin] = []
        if "LimitRanger" in names:
            limits = self.registries[scheme.LIMITRANGES]
            ranger = LimitRanger(limits.in_namespace)
            mutating.append(ranger)
            plugins.append(ranger)
        if "ServiceAccount" in names:
            mutating.append(ServiceAccountAdmission(self._service_account))
        if "DefaultTolerationSeconds" in names:
            mutating.append(DefaultTolerationSeconds(cfg.default_not_ready_toleration_seconds,
                                                     cfg.default_unreachable_toleration_seconds))
        if "Priority" in names:
            priority = PriorityAdmission(self.registries[scheme.PRIORITYCLASSES])
            plugins.append(priority)
            mutating.append(priority)
        if "PodSecurity" in names:
            plugins.append(PodSecurityAdmission(self._namespace_labels, self._namespace_pods))
        if "RuntimeClass" in names:
            runtime = RuntimeClassAdmission(lambda name: self._cached(scheme.RUNTIMECLASSES)("", name))
            mutating.append(runtime)
            plugins.append(runtime)
        classes = self.registries[scheme.STORAGECLASSES]

        async def storage_classes() -> list[storage_pb2.StorageClass]:
            # from the watch cache (resourceVersion 0), as upstream's lister
            return (await classes.list(meta_pb2.ListRequest(resourceVersion="0")))[0]

        if "DefaultStorageClass" in names:
            mutating.append(DefaultStorageClass(storage_classes))
        if "StorageObjectInUseProtection" in names:
            mutating.append(StorageObjectInUseProtection())
        if "DefaultIngressClass" in names:
            ingress_classes = self.registries[scheme.INGRESSCLASSES]

            async def every_ingress_class() -> list[custom_pb2.CustomResource]:
                return (await ingress_classes.list(meta_pb2.ListRequest(resourceVersion="0")))[0]

            mutating.append(DefaultIngressClass(every_ingress_class))
        if auth.authorizer is not None and "CertificateApproval" in names:
            plugins.append(CertificateApproval(auth.authorizer))
        if auth.authorizer is not None and "CertificateSigning" in names:
            plugins.append(CertificateSigning(auth.authorizer))
        if "CertificateSubjectRestriction" in names:
            plugins.append(CertificateSubjectRestriction())
        if "PersistentVolumeClaimResize" in names:
            plugins.append(PersistentVolumeClaimResize(lambda name: self._cached(scheme.STORAGECLASSES)("", name)))
        self._webhook_client = WebhookClient(self._service_address)
        webhook_args = (self._webhook_client, self._namespace_labels, lambda: iter(self.scheme))
        if "MutatingAdmissionWebhook" in names:
            mutating.append(MutatingWebhooks(
                WebhookSource(self.registries[scheme.MUTATINGWEBHOOKCONFIGURATIONS].watch_cache), *webhook_args))
        if "ValidatingAdmissionPolicy" in names:
            plugins.append(ValidatingPolicies(
                self.registries[scheme.VALIDATINGADMISSIONPOLICIES].watch_cache,
                self.registries[scheme.VALIDATINGADMISSIONPOLICYBINDINGS].watch_cache, self._param_objects,
                lambda name: self._cached(scheme.NAMESPACES)("", name), lambda: iter(self.scheme)))
        if "ValidatingAdmissionWebhook" in names:
            plugins.append(ValidatingWebhooks(
                WebhookSource(self.registries[scheme.VALIDATINGWEBHOOKCONFIGURATIONS].watch_cache), *webhook_args))
        if "ResourceQuota" in names:  # last, as upstream: it charges what every other plugin let through
            plugins.append(ResourceQuotaAdmission(self._quotas, self._write_quota_status))
        chain = self._admission = Admission(plugins, mutating)
        for reg in self.registries.values():
            reg.admission = chain.for_resource(reg.strategy.resource)

    def _flow_control(self) -> FlowControl | None:
        """Priority and Fairness over both front ends, from the stored configuration."""
        cfg = self.config
        if not cfg.enable_priority_and_fairness:
            return None
        by_resource = {(rt.group, rt.plural): reg for rt, reg in self.registries.items() if rt.view_of is None}

        def object_count(group: str, plural: str) -> int:
            registry = by_resource.get((group, plural))
            return len(registry.watch_cache.store) if registry is not None and registry.cache is not None else 0

        return FlowControl(self.registries[scheme.FLOWSCHEMAS].watch_cache,
                           self.registries[scheme.PRIORITYLEVELCONFIGURATIONS].watch_cache,
                           cfg.max_requests_inflight + cfg.max_mutating_requests_inflight, object_count,
                           self.metrics.registry)

    async def _quotas(self, namespace: str, fresh: bool) -> list[core_pb2.ResourceQuota]:
        """A namespace's quotas for the quota admission: the watch cache's, or etcd's when
        the cache's copy was refused as stale."""
        quotas = self.registries[scheme.RESOURCEQUOTAS]
        if not fresh:
            cached: list[core_pb2.ResourceQuota] = await quotas.in_namespace(namespace)
            # a quota the controller has just counted may not be in the cache yet as counted
            if all(dict(q.status.hard) == dict(q.spec.hard) for q in cached):
                return cached
        return (await quotas.list_from_etcd(Filter(namespace), 0, ""))[0]

    async def _write_quota_status(self, quota: core_pb2.ResourceQuota) -> core_pb2.ResourceQuota:
        written: core_pb2.ResourceQuota = await self.registries[scheme.RESOURCEQUOTAS].update(quota, status=True)
        return written

    async def _start_registries(self) -> None:
        for reg in self.registries.values():
            await reg.start()
        await asyncio.gather(*(reg.wait_ready(timeout=30) for reg in self.registries.values()))

    async def _bootstrap(self) -> None:
        """What a cluster has from its first moment: the system namespaces, the bootstrap
        roles, the system priority classes, the system namespaces' ServiceAccounts."""
        await self._bootstrap_namespaces()
        await reconcile_bootstrap(self.registries[scheme.CLUSTERROLES], self.registries[scheme.CLUSTERROLEBINDINGS])
        await bootstrap_priority_classes(self.registries[scheme.PRIORITYCLASSES])
        await ensure_configuration(self.registries[scheme.FLOWSCHEMAS],
                                   self.registries[scheme.PRIORITYLEVELCONFIGURATIONS])
        self._service_accounts = ServiceAccountsController(self.registries[scheme.NAMESPACES],
                                                           self.registries[scheme.SERVICEACCOUNTS])
        await self._service_accounts.sync()  # the system namespaces' before anyone asks
        cfg = self.config
        await publish_authentication_trust(self.registries[scheme.CONFIGMAPS], AuthenticationTrust(
            cfg.client_ca_file, cfg.requestheader_client_ca_file,
            tuple(n.strip() for n in cfg.requestheader_allowed_names.split(",") if n.strip())))

    def _subresources(self, options: Completed) -> Subresources:
        """What serves the subresources that have a gRPC method, for both front ends."""
        pods = self.registries[scheme.PODS]
        self._locator = PodLocator(pods, self.registries[scheme.NODES], options.kubelet_ssl)
        logs = PodLogProxy(self._locator)
        tokens = TokenRequests(options.token_issuer, self.registries[scheme.SERVICEACCOUNTS], pods)
        evictions = Evictions(pods, self.registries[scheme.POD_DISRUPTION_BUDGETS])

        async def binding(b: core_pb2.Binding, dry_run: bool) -> core_pb2.Pod:
            return await bind(pods, b)

        async def eviction(e: policy_pb2.Eviction, dry_run: bool) -> core_pb2.Pod:
            return await evictions.evict(e, dry_run=dry_run)

        async def token(req: authentication_pb2.TokenRequest, dry_run: bool) -> authentication_pb2.TokenRequest:
            return await tokens.create(req)

        def log_stream(req: api_pb2.PodLogRequest, dry_run: bool) -> AsyncIterator[api_pb2.PodLogChunk]:
            return logs.stream(req)

        handlers: Subresources = {(scheme.PODS, "binding"): binding, (scheme.PODS, "eviction"): eviction,
                                  (scheme.PODS, "log"): log_stream, (scheme.SERVICEACCOUNTS, "token"): token}
        for rt in self.scheme:
            if not rt.custom and rt.subresource("scale") is not None and rt in self.registries:
                scales = ScaleMethods(self.registries[rt])
                handlers[(rt, "GetScale")], handlers[(rt, "UpdateScale")] = scales.get, scales.update
        return handlers

    async def _serve_grpc(self, options: Completed, subresources: Subresources, pipeline: Pipeline) -> None:
        """Every resource's service, health and reflection."""
        self._server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
            # Calls arrived but not yet taken by this loop wait in gRPC core; past 1,000 of them
            # (its default) core drops some at random, and the client sees a bare CANCELLED it
            # cannot tell from a call that ran. A burst (a thousand kubelets registering) waits
            # instead, for flow control to serve it or refuse it with a 429 and Retry-After.
            ("grpc.server.max_pending_requests", 100_000),
            ("grpc.server.max_pending_requests_hard_limit", 200_000),
            # Long-lived watches: let clients keep idle connections alive with pings.
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
        ])
        self._server.add_generic_rpc_handlers([
            *(service_handler(rt, self.registries[rt], pipeline,
                              {sub: handler for (r, sub), handler in subresources.items() if r is rt})
              for rt in self.scheme if not rt.custom),
            custom_service_handler(self.scheme, self.registries, pipeline),
            metrics_service_handler(AggregatedMetrics(self._remote()), pipeline),
            authorization_service_handler(pipeline)])
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        names = sorted({resource.service_name for resource in self.scheme} | {METRICS_SERVICE, AUTHORIZATION_SERVICE})
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server)
        tls = options.serving_tls
        self.port = self._server.add_secure_port(self.config.listen, tls.grpc_credentials()) if tls is not None \
            else self._server.add_insecure_port(self.config.listen)
        if self.port == 0:
            raise RuntimeError(f"cannot listen on {self.config.listen}")
        await self._server.start()
        for name in ["", *names]:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)

    def _remote(self) -> RemoteAPIs:
        """The extension apiservers, followed from the first who needs them (the gRPC metrics
        service, the REST front end's proxy)."""
        if self._remote_apis is None:
            cfg = self.config
            self._remote_apis = RemoteAPIs(
                self.registries[scheme.APISERVICES], self.registries[scheme.SERVICES],
                self.registries[scheme.ENDPOINTSLICES], ProxyIdentity(cfg.proxy_client_cert_file,
                                                                      cfg.proxy_client_key_file),
                routing=cfg.enable_aggregator_routing)
            self._remote_apis.start()
        return self._remote_apis

    async def _serve_rest(self, options: Completed, subresources: Subresources, pipeline: Pipeline) -> None:
        tls = options.serving_tls
        self._rest = RestServer(self.scheme, self.registries, pipeline, subresources, PodStreams(self._locator),
                                self._ready, ssl_context=tls.ssl_context() if tls is not None else None,
                                aggregator=AggregatorProxy(self._remote()),
                                proxy=ProxyLocator(self._locator, self.registries[scheme.SERVICES],
                                                   self.registries[scheme.ENDPOINTSLICES]))
        self.rest_port = await self._rest.start(self.config.rest_listen)
        log.info("apiserver serving the REST API on %s", self.rest_address)

    def _start_controllers(self, options: Completed) -> None:
        """The apiserver's own loops, run by the replica that holds the election."""
        cfg = self.config
        assert self._service_accounts is not None
        assert self._crds is not None
        crds = self._crds
        builtin = [r for rt, r in self.registries.items() if r.strategy.namespaced and not rt.custom
                   and rt.view_of is None]

        def namespaced() -> list[Registry[Any]]:
            return [*builtin, *(r for r in crds.storage_registries() if r.strategy.namespaced)]

        definitions = self.registries[scheme.CUSTOMRESOURCEDEFINITIONS]
        loops: list[Controller] = [
            NamespaceFinalizer(self.registries[scheme.NAMESPACES], namespaced, cfg.namespace_finalize_interval),
            self._service_accounts, CRDNaming(definitions, crds), CRDFinalizer(definitions, crds),
            FlowSchemaStatus(self.registries[scheme.FLOWSCHEMAS], self.registries[scheme.PRIORITYLEVELCONFIGURATIONS]),
            LocalAPIServices(self.registries[scheme.APISERVICES], lambda: iter(self.scheme)),
            PolicyTypeChecker(self.registries[scheme.VALIDATINGADMISSIONPOLICIES], lambda: iter(self.scheme),
                              self._schema_of)]
        assert self._storage is not None

        def registry_for(group: str, plural: str) -> Registry[Any] | None:
            for rt, registry in self.registries.items():
                if (rt.group, rt.plural) == (group, plural) and rt.view_of is None:
                    return registry
            return next((r for r in crds.storage_registries()
                         if (r.strategy.resource.group, r.strategy.resource.plural) == (group, plural)), None)

        loops.append(StorageVersionMigrator(self.registries[scheme.STORAGEVERSIONMIGRATIONS], self._storage,
                                            registry_for))
        if self._remote_apis is not None:
            loops.append(APIServiceStatus(self.registries[scheme.APISERVICES], self._remote_apis))
        if options.pod_cidrs is not None:
            loops.append(NodeIPAM(self.registries[scheme.NODES], options.pod_cidrs))
        loops.append(AllocationRepair(self.registries[scheme.SERVICES], self._service_ips, self._node_ports,
                                      cfg.allocation_repair_interval))
        if self._rest is not None:
            loops.append(KubernetesService(
                self.registries[scheme.SERVICES], self.registries[scheme.ENDPOINTS],
                self.registries[scheme.ENDPOINTSLICES], options.service_ips.value(0), self._advertised(),
                cfg.advertise_port or self.rest_port))
        self._loops = loops
        self._election = ControllerElection(self.registries[scheme.LEASES], loops)
        self._election.start()

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
        if self._compactor is not None:
            await self._compactor.stop()
        for loop in self._loops:
            await loop.stop()
        if self._crds is not None:
            await self._crds.stop()
        if self._webhook_client is not None:
            await self._webhook_client.close()
        if self._remote_apis is not None:
            await self._remote_apis.stop()
        for reg in list(self.registries.values()):
            await reg.stop()
        if self._rest is not None:
            await self._rest.stop()
        if self._server is not None:
            await self._server.stop(grace)
        if self._auditor is not None:
            await self._auditor.stop()
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

    def _defragmented(self, members: list[str]) -> None:
        self.metrics.defragmentations.inc(len(members))
        defragmenter = self._compactor.defragmenter if self._compactor is not None else None
        for endpoint, size in (defragmenter.sizes if defragmenter is not None else {}).items():
            self.metrics.db_size.labels(endpoint).set(size)

    def _compacted(self, revision: int) -> None:
        self.metrics.compactions.inc()
        for reg in self.registries.values():
            reg.compacted(revision)

    def _pods_on_node(self, node: str) -> list[core_pb2.Pod]:
        """The watch cache's pods bound to a node (the Node authorizer's graph)."""
        registry = self.registries[scheme.PODS]
        items, _ = registry.watch_cache.list(registry.parse_filter("", "", f"spec.nodeName={node}"))
        return items

    def _param_objects(self, api_version: str, kind: str) -> list[Any] | None:
        """A policy's parameters: the objects of a kind now, from its watch cache."""
        resource = next((r for r in self.scheme if r.api_version == api_version and r.kind == kind), None)
        registry = self.registries.get(resource) if resource is not None else None
        if registry is None or registry.cache is None:
            return None
        return [e.obj for e in registry.cache.store.values()]

    def _schema_of(self, resource: ResourceType[Any]) -> Any:
        """The structural schema of a resource kept as JSON (a custom resource's version, or
        a built-in's), for type checks; None for one kept as protobuf."""
        registry = self.registries.get(resource)
        strategy = registry.strategy if registry is not None else None
        if isinstance(strategy, CustomResourceStrategy):
            return strategy.schema
        if isinstance(strategy, JsonStrategy):
            return strategy.openapi_schema()
        return None

    def _namespace_pods(self, namespace: str) -> list[core_pb2.Pod]:
        """A namespace's pods as the watch cache has them."""
        return [entry.obj for entry in self.registries[scheme.PODS].watch_cache.store.values()
                if entry.obj.metadata.namespace == namespace]

    def _namespace_labels(self, name: str) -> dict[str, str] | None:
        namespace = self._cached(scheme.NAMESPACES)("", name)
        return dict(namespace.metadata.labels) if namespace is not None else None

    def _cached(self, resource: ResourceType[Any]) -> Callable[[str, str], Any]:
        """(namespace, name) -> the watch cache's object or None (the authenticator's lookups
        are synchronous, as upstream's informer-backed getters)."""
        registry = self.registries[resource]

        def lookup(namespace: str, name: str) -> Any:
            return registry.watch_cache.get(registry.key(namespace, name))
        return lookup

    async def _service_account(self, namespace: str, name: str) -> core_pb2.ServiceAccount | None:
        """The cache's copy, else etcd's (one made a moment ago)."""
        registry = self.registries[scheme.SERVICEACCOUNTS]
        found = registry.watch_cache.get(registry.key(namespace, name))
        if found is None:
            try:
                found = await registry.get(namespace, name)
            except errors.NotFound:
                return None
        return found

    async def _check_namespace(self, namespace: str) -> None:
        namespaces = self.registries[scheme.NAMESPACES]
        ns = namespaces.watch_cache.get(namespaces.key("", namespace))
        if ns is None:  # the cache may lag a namespace created a moment ago: ask etcd
            try:
                ns = await namespaces.get("", namespace)
            except errors.NotFound:
                raise errors.NotFound(f'namespaces "{namespace}" not found',
                                      metadata={"kind": "Namespace", "name": namespace}) from None
        if ns.metadata.HasField("deletionTimestamp"):
            raise errors.Forbidden(f"unable to create new content in namespace {namespace} because it is being "
                                   "terminated", metadata={"cause": "NamespaceTerminating", "causeField":
                                                           "metadata.namespace", "causeMessage":
                                                           f"namespace {namespace} is being terminated"})

    async def _bootstrap_namespaces(self) -> None:
        namespaces = self.registries[scheme.NAMESPACES]
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
