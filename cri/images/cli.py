"""`kubeling image ...`: manage the node's local image store by hand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cri.images.archive import import_archive
from cri.images.builtin import DEFAULT_BUSYBOX, DEFAULT_PAUSE, BuiltinError, build_builtins
from cri.images.store import ImageRecord, ImageStore, ImageStoreError
from cri.images.unpack import LayerError

__all__ = ["add_parser", "run", "print_table", "DEFAULT_ROOT"]

DEFAULT_ROOT = Path("/var/lib/kubeling/images")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
               ) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """`kubeling image` and its store commands; the subcommands' group, for the cluster's
    own (`load`, `ls --node`) to join."""
    parser = subparsers.add_parser("image", help="manage the local image store")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"image store (default {DEFAULT_ROOT})")
    commands = parser.add_subparsers(dest="image_command", required=True)
    build = commands.add_parser("build-builtins",
                                help="make busybox and pause from the host's busybox-static and catatonit")
    build.add_argument("--busybox", type=Path, default=DEFAULT_BUSYBOX)
    build.add_argument("--pause", type=Path, default=DEFAULT_PAUSE, help="a static pause binary (catatonit)")
    build.add_argument("--force", action="store_true", help="rebuild even when present")
    load = commands.add_parser("import", help="load an OCI image archive")
    load.add_argument("file", type=Path)
    load.add_argument("--name", help="name for the image when the archive has none")
    commands.add_parser("ls", help="list the images in the store (--node: a node's of a running cluster)")
    parser.set_defaults(run=run)
    return commands


def print_table(images: list[ImageRecord]) -> None:
    rows = [("IMAGE", "TAG", "IMAGE ID", "SIZE")]
    for image in images:
        for name in image.repo_tags or ["<none>:<none>"]:
            repo, _, tag = name.rpartition(":")
            rows.append((repo, tag, image.id.removeprefix("sha256:")[:13], f"{image.size / 1e6:.1f}MB"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def run(args: argparse.Namespace) -> int:
    store = ImageStore(args.root)
    try:
        if args.image_command == "build-builtins":
            built = build_builtins(store, args.busybox, args.pause, only_missing=not args.force)
            for image in built:
                print(f"built {image.repo_tags[0]} {image.id}")
            if not built:
                print("built-in images already present (use --force to rebuild)")
        elif args.image_command == "import":
            for image in import_archive(store, args.file, args.name):
                print(f"imported {image.names[0]} {image.id}")
        else:
            print_table(store.images())
    except (ImageStoreError, LayerError, BuiltinError, OSError) as exc:
        print(f"kubeling image {args.image_command}: {exc}", file=sys.stderr)
        return 1
    return 0
