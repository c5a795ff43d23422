"""`kubeling image load` and `kubeling image ls --node`: a developer's own images into every
node of a running cluster (kind's `kind load docker-image` / `image-archive`).

A source is an image archive — `docker save`'s (manifest.json) or an OCI archive
(oci-layout) —, an OCI image layout directory, or the name of an image in the local
Docker engine. skopeo (Debian's) turns each into an OCI archive, which is imported into
every node's image store (the one its CRI runtime serves: it sees a new index at once).
Images are then used as upstream's kubelet uses local images: `imagePullPolicy:
IfNotPresent` or `Never` (a `:latest` tag defaults to `Always`, as kind's documentation
warns)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from cluster.names import ClusterNameError, add_cluster_args, state_dir_of
from cluster.plan import ClusterPlan
from cri.images.archive import import_archive
from cri.images.cli import print_table
from cri.images.cli import run as store_run
from cri.images.store import ImageStore, ImageStoreError
from cri.images.unpack import LayerError
from kubelet.agent import runtime_config

__all__ = ["extend", "sources", "node_store"]


class LoadError(Exception):
    """A source that is no image, or a cluster that cannot take it: one line for the user."""


def node_store(plan: ClusterPlan, node: str) -> ImageStore:
    return ImageStore(runtime_config(plan.kubelet_config(node)).image_root)


def _archive_kind(path: Path) -> str:
    """oci-archive or docker-archive, by what the tar holds."""
    try:
        with tarfile.open(path) as tar:
            names = {m.name.removeprefix("./") for m in tar.getmembers()[:4096]}
    except tarfile.TarError:
        raise LoadError(f"{path}: not an image archive (not a tar file)") from None
    except OSError as err:
        raise LoadError(f"{path}: {err.strerror or err}") from None
    if "oci-layout" in names:
        return "oci-archive"
    if "manifest.json" in names:
        return "docker-archive"
    raise LoadError(f"{path}: not an image archive (neither oci-layout nor manifest.json in it)")


def _docker_tags(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        member = tar.extractfile(next(m for m in tar.getmembers() if m.name.removeprefix("./") == "manifest.json"))
        assert member is not None
        entries = json.load(member)
    return [tag for entry in entries for tag in entry.get("RepoTags") or []]


def sources(source: str) -> list[tuple[str, str]]:
    """skopeo source references and image names for one command-line source."""
    path = Path(source)
    if path.is_dir():
        if not (path / "oci-layout").exists():
            raise LoadError(f"{source}: a directory that is no OCI image layout (no oci-layout file)")
        return [(f"oci:{path}", "")]
    if path.is_file():
        kind = _archive_kind(path)
        if kind == "oci-archive":
            return [(f"oci-archive:{path}", "")]
        tags = _docker_tags(path)
        if not tags:
            raise LoadError(f"{source}: its images have no names (docker save IMAGE:TAG names them)")
        return [(f"docker-archive:{path}:{tag}", tag) for tag in tags]
    if "/" in source and source.startswith((".", "/")):
        raise LoadError(f"{source}: no such file or directory")
    return [(f"docker-daemon:{source if ':' in source.rsplit('/', 1)[-1] else source + ':latest'}", source)]


def _to_oci_archive(source: str, name: str, work: Path) -> Path:
    target = work / f"{len(list(work.iterdir()))}.tar"
    destination = f"oci-archive:{target}" + (f":{name}" if name else "")
    done = subprocess.run(["skopeo", "copy", "--quiet", source, destination], capture_output=True, text=True)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"skopeo exited {done.returncode}"
        raise LoadError(f"{source.split(':', 1)[1]}: {why}")
    return target


def _plan(args: argparse.Namespace) -> tuple[ClusterPlan | None, str]:
    try:
        state_dir = state_dir_of(args)
    except ClusterNameError as err:
        return None, str(err)
    return ClusterPlan.load(state_dir), str(state_dir)


def _load(args: argparse.Namespace) -> int:
    plan, where = _plan(args)
    if plan is None or not plan.nodes:
        print(f"kubeling image load: no cluster with nodes in {where} (`kubeling up` first)", file=sys.stderr)
        return 1
    nodes = args.node or plan.nodes
    unknown = sorted(set(nodes) - set(plan.nodes))
    if unknown:
        print(f"kubeling image load: no node {', '.join(unknown)} in this cluster ({', '.join(plan.nodes)})",
              file=sys.stderr)
        return 1
    try:
        with tempfile.TemporaryDirectory(prefix="kubeling-load-") as tmp:
            archives = [_to_oci_archive(ref, name, Path(tmp)) for source in args.sources
                        for ref, name in sources(source)]  # all converted before any node changes
            for node in nodes:
                store = node_store(plan, node)
                for archive in archives:
                    # under the store's lock: the runtime's image collection may not take the
                    # blobs of an image not yet named
                    with store.locked():
                        loaded = import_archive(store, archive)
                    for image in loaded:
                        print(f"{node}: loaded {image.names[0]} {image.id[:19]}")
    except (LoadError, ImageStoreError, LayerError, OSError) as err:
        print(f"kubeling image load: {err}", file=sys.stderr)
        return 1
    return 0


def _ls(args: argparse.Namespace) -> int:
    if not args.node:
        return store_run(args)  # the store at --root
    plan, where = _plan(args)
    if plan is None or args.node not in plan.nodes:
        known = ", ".join(plan.nodes) if plan else "no cluster there"
        print(f"kubeling image ls: no node {args.node} in {where} ({known})", file=sys.stderr)
        return 1
    print_table(node_store(plan, args.node).images())
    return 0


def extend(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `load` and `ls --node` to `kubeling image`."""
    load = commands.add_parser("load", help="load images into every node of a running cluster (from docker save "
                                            "or OCI archives, OCI layouts, or the local Docker engine)")
    load.add_argument("sources", nargs="+", metavar="IMAGE|ARCHIVE",
                      help="an archive file, an OCI layout directory, or an image name in the local Docker engine")
    add_cluster_args(load)
    load.add_argument("--node", action="append", default=[], help="only this node (repeat; default: every node)")
    load.set_defaults(run=_load)
    ls = commands.choices["ls"]
    ls.add_argument("--node", default="", help="a node's store, of the cluster --name or --state-dir names")
    add_cluster_args(ls, "; with --node")
    ls.set_defaults(run=_ls)
