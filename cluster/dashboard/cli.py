"""`kubeling dashboard [--listen HOST:PORT] [--kubeconfig FILE] [--context NAME]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from aiohttp import web

from cluster.dashboard.server import Dashboard
from cluster.why import kubeconfig_path
from kubeling.app import EXIT_CONFIG
from kubeling.client import Client
from kubeling.netutil import host_port_arg, split_host_port

__all__ = ["add_parser"]

log = logging.getLogger("kubeling.dashboard")


async def _serve(args: argparse.Namespace) -> int:
    path = kubeconfig_path(args.kubeconfig)
    if not path.exists():
        print(f"kubeling dashboard: no kubeconfig at {path} (use --kubeconfig, $KUBECONFIG or `kubeling up`)",
              file=sys.stderr)
        return EXIT_CONFIG
    try:
        client = Client.from_kubeconfig(path, context=args.context, timeout=10)
    except (OSError, ValueError) as err:
        print(f"kubeling dashboard: {err}", file=sys.stderr)
        return EXIT_CONFIG
    host, port = split_host_port(args.listen)
    dashboard = Dashboard(client, traces_url=args.traces_url)
    # handler_cancellation: a page closed ends its stream's handler at once
    runner = web.AppRunner(dashboard.app(), handle_signals=False, handler_cancellation=True, shutdown_timeout=5)
    try:
        await dashboard.start()
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as err:
            print(f"kubeling dashboard: cannot listen on {args.listen}: {err.strerror}", file=sys.stderr)
            return 1
        bound = runner.addresses[0][1] if runner.addresses else port
        print(f"dashboard on http://{host}:{bound}/ (as the user of {path}); Ctrl-C stops it", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        dashboard.end_streams()
        await runner.cleanup()
        await dashboard.stop()
        await client.close()
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("dashboard", help="a web page showing the cluster live, and why each pod is where it is")
    p.add_argument("--listen", default="127.0.0.1:8001", type=host_port_arg,
                   help="HOST:PORT to serve on (default %(default)s: this machine only; port 0: any free one)")
    p.add_argument("--kubeconfig", default="",
                   help="whose view (default as kubectl's: $KUBECONFIG, ~/.kube/config, else ~/.kubeling/kubeconfig)")
    p.add_argument("--context", default="", help="a context of the kubeconfig (default: its current one)")
    p.add_argument("--traces-url", default="",
                   help="Jaeger's query API (e.g. http://127.0.0.1:16686, or `python -m cluster.otlpreceiver`'s): "
                        "each pod's start drawn from its trace (default: no timelines)")
    p.set_defaults(run=lambda args: asyncio.run(_serve(args)))
