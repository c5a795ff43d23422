"""`kubeling etcd status|defrag|recover`: the maintenance an operator of a cluster's etcd
does, as `etcdctl endpoint status`, `defrag` and `alarm disarm` do it, on every member of
a cluster `kubeling up` runs (or of `--endpoints`, with `--cacert/--cert/--key`).

`recover` is etcd's documented way out of its NOSPACE alarm (etcd.io "Space quota"):
compact the history up to the current revision, defragment each member, disarm the
alarms. The objects themselves are all kept; what goes is their past revisions, so a
watch resuming from before the compaction is told 410 Gone and relists (as after any
compaction).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from apiserver.storage.etcd import EtcdTLS, channel_target
from apiserver.storage.maintenance import Maintenance, MemberStatus
from cluster import names
from cluster.plan import ClusterPlan
from kubeling import errors
from kubeling.app import EXIT_CONFIG

__all__ = ["add_parser", "recover"]


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _print_status(statuses: list[MemberStatus]) -> None:
    rows = [("ENDPOINT", "ID", "VERSION", "DB SIZE", "IN USE", "REVISION", "LEADER", "ALARMS")]
    for s in statuses:
        rows.append((s.endpoint, f"{s.member_id:x}", s.version, _mib(s.db_size), _mib(s.db_size_in_use),
                     str(s.revision), "true" if s.leader else "false", "; ".join(a.strip() for a in s.alarms) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


async def recover(maintenance: Maintenance, endpoints: list[str]) -> list[tuple[int, str]]:
    """Compact to the current revision, defragment every member in turn, disarm every
    alarm; the alarms disarmed. Printed step by step."""
    revision = (await maintenance.status(endpoints[0])).revision
    await maintenance.compact(endpoints[0], revision)
    print(f"compacted history up to revision {revision}")
    for endpoint in endpoints:
        before = await maintenance.status(endpoint)
        await maintenance.defragment(endpoint)
        after = await maintenance.status(endpoint)
        print(f"defragmented {endpoint}: {_mib(before.db_size)} → {_mib(after.db_size)}")
    disarmed = await maintenance.disarm(endpoints[0])
    for member_id, alarm in disarmed:
        print(f"disarmed {alarm} of member {member_id:x}")
    if not disarmed:
        print("no alarm was raised")
    # etcd measures its quota against the file: what the objects themselves take stays
    print("if writes fail again, the objects themselves fill the quota: delete some (deletes work under the "
          "alarm) and recover again, or restart etcd with a larger --quota-backend-bytes")
    return disarmed


async def _run(action: str, maintenance: Maintenance, endpoints: list[str]) -> None:
    if action == "defrag":
        for endpoint in endpoints:
            before = await maintenance.status(endpoint)
            await maintenance.defragment(endpoint)
            after = await maintenance.status(endpoint)
            print(f"defragmented {endpoint}: {_mib(before.db_size)} → {_mib(after.db_size)}")
    elif action == "recover":
        await recover(maintenance, endpoints)
        print()
    _print_status([await maintenance.status(endpoint) for endpoint in endpoints])


def _target(args: argparse.Namespace) -> tuple[list[str], EtcdTLS | None] | str:
    """The members and the client TLS: --endpoints (with files), else the cluster's plan."""
    if args.endpoints:
        endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
        try:
            channel_target(endpoints)
        except ValueError as err:
            return str(err).replace("--etcd", "--endpoints")
        files = (args.cacert, args.cert, args.key)
        if not any(files):
            return endpoints, None
        if not all(files):
            return "--cacert, --cert and --key go together"
        try:
            ca, cert, key = (Path(f).read_bytes() for f in files)
        except OSError as err:
            return f"etcd TLS: {err}"
        return endpoints, EtcdTLS(ca, cert, key)
    try:
        state_dir = names.state_dir_of(args)
    except names.ClusterNameError as err:
        return str(err)
    plan = ClusterPlan.load(state_dir)
    if plan is None:
        return f"no cluster was made in {state_dir} (or give --endpoints)"
    tls = EtcdTLS(*(p.read_bytes() for p in (plan.pki / "ca.crt", plan.pki / "apiserver-etcd-client.crt",
                                              plan.pki / "apiserver-etcd-client.key")))
    return plan.etcd_endpoints.split(","), tls


def cmd_etcd(args: argparse.Namespace) -> int:
    target = _target(args)
    if isinstance(target, str):
        print(f"kubeling etcd: {target}", file=sys.stderr)
        return EXIT_CONFIG
    endpoints, tls = target
    try:
        asyncio.run(_run(args.action, Maintenance(tls, timeout=args.timeout), endpoints))
    except errors.ApiError as err:
        print(f"kubeling etcd {args.action}: {err.message}", file=sys.stderr)
        return 1
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    etcd = commands.add_parser("etcd", help="etcd's maintenance: status, defrag, recover from a full database")
    etcd.add_argument("action", choices=["status", "defrag", "recover"],
                      help="status: each member's db size, revision and alarms; defrag: give each member's free "
                           "space back, one after another; recover: out of the NOSPACE alarm (compact to the current "
                           "revision, defragment, disarm; docs/operations.md)")
    names.add_cluster_args(etcd)
    etcd.add_argument("--endpoints", default="", help="etcd members HOST:PORT, comma-separated, instead of a cluster's")
    etcd.add_argument("--cacert", default="", help="with --endpoints: etcd's CA (PEM)")
    etcd.add_argument("--cert", default="", help="with --endpoints: a client certificate etcd trusts")
    etcd.add_argument("--key", default="", help="with --endpoints: its key")
    etcd.add_argument("--timeout", type=float, default=60.0, help="seconds each call may take (default 60)")
    etcd.set_defaults(run=cmd_etcd)
