"""What a stopped node's pods left on the machine: sandboxes, containers, netns, mounts, bridge."""

from __future__ import annotations

import logging
import shutil
import subprocess

from cluster import hosts
from cluster.plan import ClusterPlan
from cluster.processes import terminate_pids
from cri.server import CRIServer
from kubelet.agent import bridge_name, runtime_config
from kubelet.config import KubeletConfig
from kubelet.runtime import CRICallError, Runtime
from kubeling import mounts
from kubeling.netfilter import Netfilter
from netpol.controller import cleanup as policy_cleanup
from proxy.proxier import Iptables

__all__ = ["clean_node", "clean_kubelet", "stop_orphans", "remove_network"]

log = logging.getLogger("kubeling.up")


async def clean_node(plan: ClusterPlan, node: str) -> None:
    """What a stopped kubelet of the plan left (a host's bridge goes with its namespace; this
    name may be another cluster's here)."""
    await clean_kubelet(plan.kubelet_config(node), remove_bridge=not plan.hosts)


async def clean_kubelet(config: KubeletConfig, *, remove_bridge: bool) -> None:
    """Remove every sandbox (containers, netns, mounts) a stopped kubelet left, through
    its own CRI runtime started once more, then its bridge."""
    node = config.node_name
    cri_config = runtime_config(config)
    if cri_config.state_dir.exists():
        cri_config.build_builtin_images = False
        server = CRIServer(cri_config)
        await server.start()
        runtime = Runtime(server.address, timeout=60)
        try:
            for sandbox in await runtime.list_sandboxes():
                try:
                    await runtime.stop_sandbox(sandbox.id)
                    await runtime.remove_sandbox(sandbox.id)
                except CRICallError as exc:
                    log.warning("node %s: sandbox %s not removed: %s", node, sandbox.id[:13], exc)
        finally:
            await runtime.close()
            await server.stop()
    if remove_bridge:
        subprocess.run(["ip", "link", "del", bridge_name(node)], capture_output=True)
    if config.runc_root is not None:
        shutil.rmtree(config.runc_root, ignore_errors=True)
    # The pods' volumes: CSI publish and staging bind mounts, tmpfs emptyDirs (the data
    # stays in the driver's directories; a kubelet started again publishes them anew).
    for where in (config.state_dir / "pods", config.state_dir / "plugins"):
        for point in reversed(mounts.mount_points(where)):
            try:
                mounts.unmount(point, lazy=True)
            except mounts.MountError as exc:
                log.warning("node %s: %s", node, exc)


async def stop_orphans(plan: ClusterPlan, running: dict[str, int], keep_state: bool) -> None:
    """Supervisor.stop for processes that are not our children."""
    def group(*names: str) -> dict[str, int]:
        return {n: running[n] for n in names if n in running}

    terminate_pids(group(*(f"kubelet-{n}" for n in plan.nodes)))
    if not keep_state:
        for node in plan.nodes:
            await clean_node(plan, node)
    terminate_pids(group(*(f"csi-hostpath-{n}" for n in plan.nodes)))
    terminate_pids(group(*plan.addons))
    terminate_pids(group("haproxy", *(name for name, _, _ in plan.apiserver_backends)))
    terminate_pids(group(*(name for name, _, _ in plan.etcd_members)))
    remove_network(plan)


def remove_network(plan: ClusterPlan) -> None:
    """kube-proxy's and the network policy controller's rules and sets (a killed one leaves
    them; the hosts' go with their namespaces) and the underlay with its hosts."""
    if not plan.hosts:
        Iptables().cleanup()
        policy_cleanup(Netfilter())
    if plan.hosts_subnet:
        hosts.destroy(plan.state_dir, [plan.netns(n) for n in plan.nodes])
