"""A whole cluster per test: etcd (the session's), an apiserver, the scheduler and
kubelets with their CRI runtimes, real runc and CNI, secured as `kubeling up` secures
it: TLS everywhere from one cluster CA, each component with its own certificate
(the admin's for the test's client and kubectl), `--authorization-mode Node,RBAC` and
NodeRestriction, the kubelets' endpoints only for the apiserver. Every node has its own bridge,
pod CIDR (out of a private cluster CIDR) and state; at the end every pod is deleted
through the API (so the kubelets' termination path runs) and nothing may be left:
no runc containers, shims, netns, mounts, or bridges."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from cluster.hosts import choose_subnet, host_ip
from clusterdns.addon import publish
from clusterdns.server import DNSConfig, DNSServer
from cni import netns
from controllers.controllerref import update_with_retry
from controllers.jobutil import TRACKING_FINALIZER
from controllers.manager import ControllerManager, ManagerConfig
from cri.runc import Runc, RuncError
from csi.service import HostpathService, ServiceConfig
from kubelet.agent import Kubelet, bridge_name
from kubelet.config import KubeletConfig
from kubeling import errors, pki
from kubeling.client import Client, TLSConfig
from kubeling.dynamic import content_of
from kubeling.kubeconfig import write_kubeconfig
from metricsserver.addon import APISERVICE as METRICS_APISERVICE
from metricsserver.addon import register as register_metrics
from metricsserver.server import MetricsConfig, MetricsServer
from protos.kubeling.v1 import core_pb2, meta_pb2
from proxy.proxier import Proxier, ProxyConfig
from scheduler.service import SchedulerService
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl
from tests.wait import settle, until

HOSTPATH_DRIVER = "hostpath.csi.kubeling.io"
CLUSTER_CIDR = f"10.{180 + os.getpid() % 10}.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"  # the apiserver's default range
DNS_IP = "10.96.0.10"


def tls_of(root: Path, identity: str) -> TLSConfig:
    """A component's credentials from the cluster PKI (identity: admin, scheduler, kubelet/<node>-client)."""
    return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt", root / f"{identity}.key")


def secured_apiserver_config(etcd: EtcdServer, prefix: str, root: Path, **overrides: Any) -> Any:
    """The apiserver as `kubeling up` configures it, over the PKI under root."""
    return apiserver_config(
        etcd, prefix, tls_cert_file=str(root / "apiserver.crt"), tls_private_key_file=str(root / "apiserver.key"),
        client_ca_file=str(root / "ca.crt"), authorization_mode="Node,RBAC",
        kubelet_client_certificate=str(root / "apiserver-kubelet-client.crt"),
        kubelet_client_key=str(root / "apiserver-kubelet-client.key"),
        kubelet_certificate_authority=str(root / "ca.crt"),
        proxy_client_cert_file=str(root / "front-proxy-client.crt"),
        proxy_client_key_file=str(root / "front-proxy-client.key"),
        requestheader_client_ca_file=str(root / "front-proxy-ca.crt"), enable_aggregator_routing=True, **overrides)


@dataclass
class Cluster:
    base: Path
    apiserver: APIServer
    client: Client
    scheduler: SchedulerService
    kubelets: dict[str, Kubelet] = field(default_factory=dict)

    @property
    def pki(self) -> Path:
        return self.base / "pki"

    def kubelet_config(self, name: str, **overrides: Any) -> KubeletConfig:
        pki.ensure(self.pki, {name: ["127.0.0.1"]})
        kubeconfig = write_kubeconfig(self.base / f"kubelet-{name}.conf", self.apiserver.rest_address,
                                      self.apiserver.address, tls=tls_of(self.pki, f"kubelet/{name}-client"))
        config = KubeletConfig(node_name=name, apiserver=self.apiserver.address, root_dir=self.base / "kubelets",
                               pod_logs_dir=self.base / "pod-logs", runc_root=self.base / "runc" / name,
                               cluster_cidr=CLUSTER_CIDR, node_status_update_frequency=1.0,
                               housekeeping_interval=0.5, container_gc_period=2.0, crash_loop_backoff_initial=1.0,
                               crash_loop_backoff_max=4.0, kubeconfig=kubeconfig,
                               tls_cert_file=self.pki / "kubelet" / f"{name}.crt",
                               tls_private_key_file=self.pki / "kubelet" / f"{name}.key",
                               client_ca_file=self.pki / "ca.crt")
        for key, value in overrides.items():
            setattr(config, key, value)
        return config

    def admin_client(self, **options: Any) -> Client:
        return Client(self.apiserver.address, tls=tls_of(self.pki, "admin"), **options)

    async def add_node(self, index: int, **overrides: Any) -> Kubelet:
        name = f"k{os.getpid() % 10000}n{index}"
        kubelet = Kubelet(self.kubelet_config(name, **overrides))
        self.kubelets[name] = kubelet
        await kubelet.start()
        return kubelet

    async def restart_apiserver(self) -> None:
        """Stop the apiserver and start a new one on the same address and etcd prefix."""
        config = self.apiserver.config
        await self.apiserver.stop(grace=0)
        config.listen = self.apiserver.address
        self.apiserver = APIServer(config)
        await self.apiserver.start()

    async def restart_node(self, name: str) -> Kubelet:
        """Stop the kubelet (its pods keep running) and start a new one with the same config."""
        old = self.kubelets[name]
        await old.stop()
        self.kubelets[name] = kubelet = Kubelet(old.config)
        await kubelet.start()
        return kubelet

    async def wait_pod(self, name: str, predicate: Callable[[Any], bool], timeout: float = 60.0,
                       namespace: str = "default") -> Any:
        return await until(lambda: self.client.pods.get(name, namespace), f"pod {namespace}/{name}", timeout,
                           interval=0.1, check=predicate, retry_on=(errors.NotFound,))

    async def wait_gone(self, name: str, timeout: float = 60.0, namespace: str = "default") -> None:
        async def gone() -> bool:
            try:
                await self.client.pods.get(name, namespace)
                return False
            except errors.NotFound:
                return True
        await until(gone, f"pod {namespace}/{name} gone", timeout, interval=0.1)


def pod(name: str, *containers: core_pb2.Container, restart_policy: str = "Always", node: str = "",
        init: tuple[core_pb2.Container, ...] = (), grace: int | None = 2, **spec: Any) -> core_pb2.Pod:
    made = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(containers=list(containers), initContainers=list(init),
                                              restartPolicy=restart_policy, nodeName=node, **spec))
    if grace is not None:
        made.spec.terminationGracePeriodSeconds = grace
    return made


def container(name: str, *command: str, **fields: Any) -> core_pb2.Container:
    return core_pb2.Container(name=name, image="busybox", command=list(command), **fields)


def _shims(base: Path) -> str:
    """Shims (and zygotes) of this cluster's nodes: their command lines name their runc root."""
    return subprocess.run(["pgrep", "-f", f"cri.shim .*--runc-root {base}/"],
                          capture_output=True, text=True).stdout


@pytest.fixture
async def cluster(etcd: EtcdServer, prefix: str) -> AsyncIterator[Cluster]:
    base = Path(tempfile.mkdtemp(prefix="ke2e-"))
    netns_before = set(netns.list_names())
    root = base / "pki"
    pki.ensure(root, {})
    apiserver = APIServer(secured_apiserver_config(etcd, prefix, root, cluster_cidr=CLUSTER_CIDR,
                                                   rest_listen="127.0.0.1:0"))
    await apiserver.start()
    client = Client(apiserver.address, tls=tls_of(root, "admin"))
    # The kubernetes Service is the elected apiserver's first write: a pod started before it
    # exists gets no KUBERNETES_SERVICE_* variables (a fresh `kubeling up` has it long
    # before anyone runs a pod; a test adding a node at once may not).
    await until(lambda: client.services.get("kubernetes", "default"), "the kubernetes Service", timeout=30,
                retry_on=(errors.NotFound,))
    scheduler = SchedulerService(apiserver.address, client=Client(apiserver.address, tls=tls_of(root, "scheduler")))
    await scheduler.start()
    made = Cluster(base, apiserver, client, scheduler)
    try:
        yield made
    finally:
        # Delete every pod through the API; running kubelets stop and confirm them.
        try:
            pods, _ = await client.pods.list_all()
            for p in pods:
                try:
                    await client.pods.delete(p.metadata.name, p.metadata.namespace)
                except errors.NotFound:
                    pass  # its kubelet (or a controller) finished deleting it meanwhile
            left = await settle(lambda: client.pods.list_all(), timeout=60, check=lambda found: not found[0])
            remaining = [p.metadata.name for p in left[0]]

            # A finished pod leaves the API at once; its kubelet removes its containers after.
            async def containers() -> list[Any]:
                try:
                    return [c for k in made.kubelets.values()
                            for c in await Runc(k.config.runc_root or base).list_containers()]
                except RuncError as err:  # a container's state removed while runc listed it: look again
                    return [err]
            await settle(containers, timeout=15, check=lambda found: not found)
        finally:
            for kubelet in made.kubelets.values():
                await kubelet.stop()
            await scheduler.stop()
            await client.close()
            await made.apiserver.stop(grace=0)
        leftovers = {name: await Runc(k.config.runc_root or base).list_containers()
                     for name, k in made.kubelets.items()}
        shims = await settle(lambda: _shims(base), timeout=5, check=lambda found: not found)
        mounts = Path("/proc/self/mountinfo").read_text()
        for name in made.kubelets:
            subprocess.run(["ip", "link", "del", bridge_name(name)], capture_output=True)
        bridges = {name for name in made.kubelets
                   if subprocess.run(["ip", "link", "show", bridge_name(name)], capture_output=True).returncode == 0}
        shutil.rmtree(base, ignore_errors=True)
        assert remaining == [], f"pods not removed by their kubelets: {remaining}"
        assert all(v == [] for v in leftovers.values()), leftovers
        assert shims == ""
        assert str(base) not in mounts
        assert set(netns.list_names()) == netns_before
        assert not bridges


@pytest.fixture
def kubectl(cluster: Cluster, tmp_path: Path) -> Kubectl:
    """The real kubectl, configured for the cluster's REST API."""
    return Kubectl(write_kubeconfig(tmp_path / "kubeconfig", cluster.apiserver.rest_address, cluster.apiserver.address,
                                    tls=tls_of(cluster.pki, "admin")))


@pytest.fixture
async def metrics_server(cluster: Cluster) -> AsyncIterator[MetricsServer]:
    """The metrics server on loopback, registered with the aggregator as `kubeling up` does
    (`kubectl top`, the HorizontalPodAutoscaler)."""
    root = cluster.pki
    server = MetricsServer(Client(cluster.apiserver.address, tls=tls_of(root, "metrics-server")), MetricsConfig(
        listen="127.0.0.1:0", tls_cert_file=str(root / "metrics-server-serving.crt"),
        tls_private_key_file=str(root / "metrics-server-serving.key"),
        requestheader_client_ca_file=str(root / "front-proxy-ca.crt"),
        kubelet_client_certificate=str(root / "metrics-server.crt"),
        kubelet_client_key=str(root / "metrics-server.key"), kubelet_certificate_authority=str(root / "ca.crt")))
    await server.start()
    try:
        await register_metrics(cluster.client, "127.0.0.1", server.port, (root / "ca.crt").read_bytes())

        async def available() -> bool:
            found = await cluster.client.apiservices.get(METRICS_APISERVICE)
            conditions = (content_of(found).get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
        await until(available, "the metrics APIService Available", timeout=30)
        yield server
    finally:
        await server.stop()
        await server.client.close()


@pytest.fixture
async def controllers(cluster: Cluster) -> AsyncIterator[ControllerManager]:
    """The controller manager on the cluster, with its own certificate; stopped before the
    cluster's teardown (which then deletes what is left). Job backoff shortened for tests."""
    manager = ControllerManager(Client(cluster.apiserver.address, tls=tls_of(cluster.pki, "controller-manager")),
                                ManagerConfig(leader_elect=False, job_backoff_base=1.0,
                                              horizontal_pod_autoscaler_sync_period=1.0,
                                              root_ca_file=cluster.pki / "ca.crt"))
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()
        # What the controllers made goes with its owners, as the garbage collector would.
        client = cluster.client
        for resource in (client.horizontalpodautoscalers, client.cronjobs, client.deployments, client.replicasets,
                         client.replicationcontrollers, client.daemonsets, client.statefulsets, client.jobs):
            items, _ = await resource.list_all()
            for obj in items:
                await resource.delete(obj.metadata.name, obj.metadata.namespace)
        # Job pods keep the Job controller's tracking finalizer: nothing would remove it now
        pods, _ = await client.pods.list_all()
        for p in pods:
            if TRACKING_FINALIZER in p.metadata.finalizers:
                await update_with_retry(client.pods, p, _without_tracking)


def _without_tracking(p: core_pb2.Pod) -> bool:
    kept = [f for f in p.metadata.finalizers if f != TRACKING_FINALIZER]
    del p.metadata.finalizers[:]
    p.metadata.finalizers.extend(kept)
    return True


@dataclass
class ServiceNetwork:
    """What Services need beyond the cluster fixture: an address of the host's that pods can
    reach (on a bridge of the test's own, routing nowhere), the apiserver's REST API there
    (the `kubernetes` Service's endpoint), the cluster DNS there (`kube-dns`), one kube-proxy
    for the host's network namespace (every node of the cluster fixture shares it)."""

    address: str
    dns: DNSServer
    proxy: Proxier

    def node_settings(self) -> dict[str, Any]:
        return {"cluster_dns": [DNS_IP], "service_cidr": SERVICE_CIDR}


@pytest.fixture
async def service_network(cluster: Cluster) -> AsyncIterator[ServiceNetwork]:
    subnet = choose_subnet()
    address, bridge = host_ip(subnet, 0), f"kbsvc{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", bridge], check=True)
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        pki.ensure(cluster.pki, {}, server_names=[address])  # the apiserver's certificate names it too
        cluster.apiserver.config.rest_listen = f"{address}:0"
        cluster.apiserver.config.advertise_address = address
        await cluster.restart_apiserver()
        dns = DNSServer(Client(cluster.apiserver.address, tls=tls_of(cluster.pki, "kube-dns")),
                        DNSConfig(listen=f"{address}:0"))
        await dns.start()
        proxy = Proxier(Client(cluster.apiserver.address, tls=tls_of(cluster.pki, "kube-proxy")), ProxyConfig(
            node_names=[], cluster_cidr=CLUSTER_CIDR, service_cidr=SERVICE_CIDR, nodeport_addresses=[address],
            min_sync_period=0.2))
        try:
            await publish(cluster.client, DNS_IP, address, dns.port)
            await proxy.start()
            yield ServiceNetwork(address, dns, proxy)
        finally:
            await proxy.stop()
            await dns.stop()
            await dns.client.close()
            await proxy.client.close()
        saved = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        assert "KUBE-" not in saved, "kube-proxy left rules behind"
    finally:
        subprocess.run(["ip", "link", "del", bridge], check=False)


# ---------------------------------------------------------------- storage

@dataclass
class Storage:
    """The hostpath CSI driver on the nodes that want one (a process of its own under
    `kubeling up`; here in the test's), for the tests with claims (the `storage` fixture)."""

    cluster: Cluster
    drivers: dict[str, HostpathService] = field(default_factory=dict)

    async def add_node(self, index: int) -> Kubelet:
        kubelet = await self.cluster.add_node(index)
        await self.start_driver(kubelet)
        return kubelet

    async def start_driver(self, kubelet: Kubelet) -> HostpathService:
        name = kubelet.config.node_name
        service = HostpathService(ServiceConfig(
            node_id=name, state_dir=self.cluster.base / "csi" / name,
            registration_dir=kubelet.config.state_dir / "plugins_registry"),
            Client(self.cluster.apiserver.address, tls=tls_of(self.cluster.pki, "csi-hostpath")))
        await service.start()
        self.drivers[name] = service
        await until(lambda: self.cluster.client.csinodes.get(name), f"{HOSTPATH_DRIVER} registered on {name}",
                    check=lambda n: any(d.name == HOSTPATH_DRIVER for d in n.spec.drivers), retry_on=(errors.NotFound,))
        return service

    def volume_dir(self, node: str, pv: core_pb2.PersistentVolume) -> Path:
        return self.cluster.base / "csi" / node / "volumes" / pv.spec.csi.volumeHandle


@pytest.fixture
async def storage(cluster: Cluster, controllers: ControllerManager) -> AsyncIterator[Storage]:
    made = Storage(cluster)
    try:
        yield made
    finally:
        client = cluster.client
        for p in (await client.pods.list_all())[0]:
            await client.pods.delete(p.metadata.name, p.metadata.namespace, grace_period_seconds=0)
        for c in (await client.persistentvolumeclaims.list_all())[0]:
            await client.persistentvolumeclaims.delete(c.metadata.name, c.metadata.namespace)
        # Provisioned volumes go with their claims (Delete); what a Retain class kept, here.
        await until(lambda: client.persistentvolumeclaims.list_all(), "the claims gone", timeout=60,
                    check=lambda found: not found[0])
        for v in (await client.persistentvolumes.list_all())[0]:
            if v.spec.persistentVolumeReclaimPolicy != "Delete":
                await client.persistentvolumes.delete(v.metadata.name)
        await until(lambda: client.persistentvolumes.list_all(), "the volumes gone", timeout=60,
                    check=lambda found: not found[0])
        for service in made.drivers.values():
            await service.stop()
