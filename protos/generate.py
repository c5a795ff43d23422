"""Regenerate (or check) the Python modules generated from protos/**/*.proto.

    python -m protos.generate           # rewrite the generated modules
    python -m protos.generate --check   # exit 1 when they are stale
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files() -> list[Path]:
    return sorted((ROOT / "protos").rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc for every .proto into out_dir; return the generated paths (relative)."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency: only needed here

    include = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(ROOT)) for p in proto_files()]
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p.relative_to(out_dir) for p in out_dir.rglob("*") if p.name.endswith(SUFFIXES))


def stale() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        problems = [str(rel) for rel in fresh
                    if not (ROOT / rel).exists() or not filecmp.cmp(Path(tmp) / rel, ROOT / rel, shallow=False)]
        present = {p.relative_to(ROOT) for p in (ROOT / "protos").rglob("*") if p.name.endswith(SUFFIXES)}
        problems += [f"{rel} (no .proto generates it)" for rel in sorted(present - set(fresh))]
        return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report stale generated modules")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        for p in problems:
            print(f"stale: {p}", file=sys.stderr)
        if problems:
            print("run `make protos` and commit the result", file=sys.stderr)
            return 1
        print("generated modules: fresh")
        return 0
    generate(ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
