"""python -m kubelet --node-name NAME --kubeconfig FILE | --apiserver HOST:PORT [--config FILE]: the
kubelet agent, hosting the CRI runtime (cri/) in the same process unless
--container-runtime-endpoint names another (flags: `--help`, docs/flags.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubelet.agent import Kubelet
from kubelet.config import KubeletConfig, from_command_line
from kubeling import app
from kubeling.childwatch import watch_children_with_pidfd
from kubeling.options import add_flags

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m kubelet", __doc__ or "")
    p.add_argument("--config", type=Path, help="YAML or JSON file of settings (KubeletConfiguration's keys); flags "
                                               "given here win")
    add_flags(p, KubeletConfig, suppress_defaults=True)  # unset flags leave the file's settings
    return p


async def _serve(args: argparse.Namespace) -> None:
    config = from_command_line(args)
    watch_children_with_pidfd()
    await app.serve(Kubelet(config))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return app.run(f"kubelet-{args.node_name}", args, lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())
