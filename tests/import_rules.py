"""The import rules between our top-level packages, in the spirit of upstream's
`.import-restrictions`: `python -m tests.import_rules` prints every import that breaks one
and exits 1 (`make check` runs it; tests/unit/test_import_rules.py checks the checker).

- `kubeling` is the library at the bottom: it imports no component.
- `scheduler`, `kubelet`, `controllers`, `proxy`, `clusterdns` and `cni` never import `apiserver`
  (they talk to it over gRPC), nor each other.
- `cni` imports no other component (the kubeling library only).
- `protos` imports nothing of ours.
- `cluster` (the `kubeling` command) is the top: nothing imports it.

Every import counts, including those inside functions.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FORBIDDEN", "Violation", "violations"]

ROOT = Path(__file__).resolve().parents[1]

COMPONENTS = frozenset({"apiserver", "scheduler", "kubelet", "cni", "cluster", "controllers", "proxy", "clusterdns"})
OURS = COMPONENTS | {"kubeling", "protos", "bench", "tests"}

# package -> the packages of ours it must not import
FORBIDDEN: dict[str, frozenset[str]] = {
    "kubeling": COMPONENTS | {"bench", "tests"},
    "scheduler": COMPONENTS - {"scheduler"} | {"bench", "tests"},
    "kubelet": COMPONENTS - {"kubelet", "cni"} | {"bench", "tests"},
    "controllers": COMPONENTS - {"controllers"} | {"bench", "tests"},
    "proxy": COMPONENTS - {"proxy"} | {"bench", "tests"},
    "clusterdns": COMPONENTS - {"clusterdns"} | {"bench", "tests"},
    "cni": COMPONENTS - {"cni"} | {"bench", "tests"},
    "apiserver": COMPONENTS - {"apiserver"} | {"bench", "tests"},
    "protos": OURS - {"protos"},
    "bench": frozenset({"cluster"}),
}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}"


def _imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def violations(root: Path = ROOT) -> list[Violation]:
    out = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            for line, module in _imports(ast.parse(path.read_text(), str(path))):
                if module.split(".")[0] in forbidden:
                    out.append(Violation(str(path.relative_to(root)), line, module))
    return out


def main() -> int:
    found = violations()
    for violation in found:
        print(violation)
    print(f"import rules: {len(found)} violation(s)" if found else "import rules: ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
