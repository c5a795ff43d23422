"""The kubelet's network plugin manager (the seeds' cniNetworkPlugin).

SetUpPod adds the fixed loopback network, then the default network (the first valid
config in the conf dir, re-read when the dir changes) and returns the pod's IPs;
TearDownPod removes the default network and tolerates a namespace that is gone. With no
config in the dir but a pod CIDR from the node (the POD_CIDR_CHANGE event), it writes a
default bridge + host-local conflist on that CIDR, as kubenet did.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cni.api import DEFAULT_CACHE_DIR, DEFAULT_PATH, CNIConfig, RuntimeConf
from cni.conf import NetworkConfigList, load_dir, parse_conflist
from cni.invoke import PluginError
from cri.hostport import HostPortHolder, PortMapping
from kubeling.atomicfile import replace_file

__all__ = ["NetworkPluginManager", "PodNetwork", "NetworkNotReady", "POD_CIDR_CHANGE", "DEFAULT_CONFLIST"]

log = logging.getLogger(__name__)

POD_CIDR_CHANGE = "pod-cidr-change"
DEFAULT_CONFLIST = "10-kubeling.conflist"
_LOOPBACK = parse_conflist({"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]})


class NetworkNotReady(Exception):
    pass


@dataclass(frozen=True)
class PodNetwork:
    namespace: str
    name: str
    uid: str
    sandbox_id: str
    netns: str  # path; "" when the namespace is gone
    port_mappings: tuple[PortMapping, ...] = ()
    bandwidth: dict[str, int] = field(default_factory=dict)

    def args(self) -> tuple[tuple[str, str], ...]:
        return (("IgnoreUnknown", "1"), ("K8S_POD_NAMESPACE", self.namespace), ("K8S_POD_NAME", self.name),
                ("K8S_POD_INFRA_CONTAINER_ID", self.sandbox_id), ("K8S_POD_UID", self.uid))


class NetworkPluginManager:
    def __init__(self, conf_dir: str | Path, bin_dirs: list[str] | None = None, *,
                 cache_dir: str | Path = DEFAULT_CACHE_DIR, bridge: str = "cni0",
                 cluster_cidr: str = "10.88.0.0/16", service_cidr: str = "", node_network: str = "",
                 ipam_data_dir: str | Path | None = None, timeout: float = 30.0) -> None:
        """`bridge`, `cluster_cidr`, `service_cidr`, `node_network` (pods' only routes) and `ipam_data_dir`
        (host-local's, default its own /var/lib/cni/networks) shape the default conflist
        written on a pod-CIDR event."""
        self.conf_dir = Path(conf_dir)
        self.ipam_data_dir = Path(ipam_data_dir) if ipam_data_dir else None
        self.cni = CNIConfig(bin_dirs or DEFAULT_PATH, cache_dir=cache_dir, timeout=timeout)
        self.bridge = bridge
        self.cluster_cidr = cluster_cidr
        self.service_cidr = service_cidr
        self.node_network = node_network
        self.hairpin_mode = "hairpin-veth"
        self.mtu = 0
        self.ports = HostPortHolder()
        self._network: NetworkConfigList | None = None
        self._stamp: tuple[Any, ...] | None = None
        self._locks: dict[str, asyncio.Lock] = {}

    # ------------------------------------------------------------ configuration

    def init(self, hairpin_mode: str = "hairpin-veth", mtu: int = 0) -> None:
        if hairpin_mode not in ("hairpin-veth", "promiscuous-bridge", "none"):
            raise ValueError(f"unknown hairpin mode {hairpin_mode!r}")
        self.hairpin_mode, self.mtu = hairpin_mode, mtu

    def _dir_stamp(self) -> tuple[Any, ...]:
        try:
            entries = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in self.conf_dir.iterdir())
        except FileNotFoundError:
            return ()
        return tuple(entries)

    def default_network(self) -> NetworkConfigList | None:
        """The first valid network in the conf dir (re-read when the dir changed)."""
        stamp = self._dir_stamp()
        if stamp != self._stamp:
            networks = load_dir(self.conf_dir)
            self._network = networks[0] if networks else None
            self._stamp = stamp
            if self._network is not None:
                log.info("CNI default network %r from %s", self._network.name, self._network.source)
        return self._network

    def status(self) -> None:
        """Raise NetworkNotReady while there is no default network (NetworkReady=false)."""
        if self.default_network() is None:
            raise NetworkNotReady(f"no valid networks found in {self.conf_dir}")

    def event(self, name: str, details: dict[str, Any]) -> None:
        """POD_CIDR_CHANGE with {"podCIDR": ...}: write the default conflist when none is configured."""
        if name != POD_CIDR_CHANGE:
            return
        cidr = str(details.get("podCIDR", ""))
        if not cidr:
            return
        ipaddress.ip_network(cidr, strict=True)  # refuse garbage loudly
        if self.default_network() is not None and self._network is not None \
                and Path(self._network.source).name != DEFAULT_CONFLIST:
            return  # the user configured a network: leave it alone
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        target = self.conf_dir / DEFAULT_CONFLIST
        doc = self._default_conflist(cidr)
        replace_file(target, json.dumps(doc, indent=2).encode(), 0o644)
        log.info("wrote %s for pod CIDR %s (bridge %s)", target, cidr, self.bridge)

    def _default_conflist(self, pod_cidr: str) -> dict[str, Any]:
        bridge: dict[str, Any] = {
            "type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False,
            "hairpinMode": self.hairpin_mode == "hairpin-veth",
            "promiscMode": self.hairpin_mode == "promiscuous-bridge",
            # routes to the cluster's pod, service and node networks only: pods never get a route to outside
            "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]],
                     "routes": [{"dst": cidr} for cidr in (self.cluster_cidr, self.service_cidr, self.node_network)
                                if cidr]},
        }
        if self.ipam_data_dir is not None:
            bridge["ipam"]["dataDir"] = str(self.ipam_data_dir)
        if self.mtu:
            bridge["mtu"] = self.mtu
        return {"cniVersion": "1.0.0", "name": "kubeling", "plugins": [
            bridge, {"type": "portmap", "capabilities": {"portMappings": True}}]}

    # ------------------------------------------------------------ pods

    def _lock(self, pod: PodNetwork) -> asyncio.Lock:
        return self._locks.setdefault(pod.sandbox_id, asyncio.Lock())

    def _runtime(self, pod: PodNetwork, ifname: str) -> RuntimeConf:
        caps: dict[str, Any] = {}
        if pod.port_mappings:
            caps["portMappings"] = [m.to_runtime() for m in pod.port_mappings]
        if pod.bandwidth:
            caps["bandwidth"] = dict(pod.bandwidth)
        return RuntimeConf(pod.sandbox_id, pod.netns, ifname, pod.args(), caps)

    async def set_up_pod(self, pod: PodNetwork) -> list[str]:
        """Loopback, then the default network; returns the pod's IPs. On failure nothing is
        left: the default network is deleted again and held host ports are released."""
        net = self.default_network()
        if net is None:
            raise NetworkNotReady(f"no valid networks found in {self.conf_dir}")
        async with self._lock(pod):
            await self.cni.add_network_list(_LOOPBACK, RuntimeConf(pod.sandbox_id, pod.netns, "lo", pod.args()))
            self.ports.hold(pod.sandbox_id, list(pod.port_mappings))
            rt = self._runtime(pod, "eth0")
            try:
                result = await self.cni.add_network_list(net, rt)
            except BaseException:
                try:
                    await self.cni.del_network_list(net, rt)
                except PluginError as err:
                    log.warning("pod %s/%s: cleanup after failed ADD: %s", pod.namespace, pod.name, err)
                self.ports.release(pod.sandbox_id)
                raise
            ips = [ip.ip for ip in result.ips]
            log.info("pod %s/%s: network %s set up, IPs %s", pod.namespace, pod.name, net.name, ips)
            return ips

    async def tear_down_pod(self, pod: PodNetwork) -> None:
        net = self.default_network()
        async with self._lock(pod):
            netns = pod.netns if pod.netns and Path(pod.netns).exists() else ""
            # Loopback first, as upstream's TearDownPod: its failure is logged, never fatal
            # (DEL also drops the cached result libcni keeps for it).
            try:
                await self.cni.del_network_list(_LOOPBACK, RuntimeConf(pod.sandbox_id, netns, "lo", pod.args()))
            except PluginError as err:
                log.warning("pod %s/%s: deleting the loopback network: %s", pod.namespace, pod.name, err)
            if net is not None:
                await self.cni.del_network_list(net, RuntimeConf(pod.sandbox_id, netns, "eth0", pod.args(),
                                                                 self._runtime(pod, "eth0").capability_args))
            self.ports.release(pod.sandbox_id)
        self._locks.pop(pod.sandbox_id, None)

    async def check_pod(self, pod: PodNetwork) -> None:
        net = self.default_network()
        if net is None:
            raise NetworkNotReady(f"no valid networks found in {self.conf_dir}")
        await self.cni.check_network_list(net, self._runtime(pod, "eth0"))

    def get_pod_network_status(self, pod: PodNetwork) -> list[str]:
        """The pod's IPs as the default network's ADD reported them (empty when unknown)."""
        net = self.default_network()
        if net is None:
            return []
        cached = self.cni.cached_result(net, self._runtime(pod, "eth0"))
        return [ip.ip for ip in cached.ips] if cached is not None else []
