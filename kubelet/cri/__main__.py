"""python -m kubelet.cri --socket PATH [--state-dir DIR] [--cni-conf-dir D] [--registry-config-dir D]
[--streaming-listen HOST:PORT]: the CRI runtime alone."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from kubelet.cri.server import (
    DEFAULT_CNI_CONF_DIR,
    DEFAULT_RUNC_ROOT,
    DEFAULT_SOCKET,
    DEFAULT_STATE_DIR,
    CRIConfig,
    CRIServer,
)
from kubeling import telemetry
from kubeling.childwatch import watch_children_with_pidfd
from kubeling.netutil import host_port_arg
from kubeling.signals import wait_for_termination


async def _serve(config: CRIConfig) -> None:
    watch_children_with_pidfd()
    server = CRIServer(config)
    await server.start()
    await wait_for_termination()
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubelet.cri", description=__doc__)
    parser.add_argument("--socket", type=Path, default=DEFAULT_SOCKET)
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument("--cni-conf-dir", type=Path, default=DEFAULT_CNI_CONF_DIR)
    parser.add_argument("--cni-bin-dir", action="append", dest="cni_bin_dirs",
                        help="CNI plugin directory (repeatable; default /usr/lib/cni and /opt/cni/bin)")
    parser.add_argument("--runc-root", type=Path, default=DEFAULT_RUNC_ROOT,
                        help=f"runc state directory, on tmpfs (default {DEFAULT_RUNC_ROOT})")
    parser.add_argument("--cni-cache-dir", type=Path, default=None,
                        help="CNI result cache (default libcni's /var/lib/cni)")
    parser.add_argument("--registry-config-dir", type=Path, default=None,
                        help="registry hosts configuration, containerd's hosts.toml layout: "
                             "DIR/<registry>/hosts.toml with mirrors, plain HTTP, CAs (e.g. /etc/containerd/certs.d)")
    parser.add_argument("--streaming-listen", type=host_port_arg, default="127.0.0.1:0",
                        help="HOST:PORT of the streaming server for exec, attach and port-forward "
                             "(default %(default)s: loopback, a free port)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = CRIConfig(socket=args.socket, state_dir=args.state_dir, cni_conf_dir=args.cni_conf_dir,
                       runc_root=args.runc_root, cni_cache_dir=args.cni_cache_dir,
                       registry_config_dir=args.registry_config_dir, streaming_listen=args.streaming_listen)
    if args.cni_bin_dirs:
        config.cni_bin_dirs = args.cni_bin_dirs
    shutdown = telemetry.setup("kubelet-cri")
    try:
        asyncio.run(_serve(config))
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
