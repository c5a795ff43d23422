"""The import rules of the tree, in the spirit of upstream's `.import-restrictions`:
`python -m tests.import_rules` prints every import that breaks one, and every circle of
imports between modules, and exits 1 (`make check` runs it; tests/unit/test_import_rules.py
checks the checker).

Between the top-level packages:
- `kubeling` is the library at the bottom: it imports no component.
- `scheduler`, `kubelet`, `controllers`, `proxy`, `netpol`, `ingress`, `clusterdns`, `csi`,
  `metricsserver`, `cri` and `cni` never import `apiserver` (they talk to it over gRPC),
  nor each other; but the kubelet hosts the CRI runtime (`cri`), and the runtime drives
  libcni (`cni`).
- `cni` imports no other component (the kubeling library only).
- `protos` imports nothing of ours.
- `cluster` (the `kubeling` command) is the top: nothing imports it, but the benchmarks
  start etcd with its launcher (`cluster.etcd`).

Inside the apiserver (by role, as kube-apiserver's packages):
- `storage` (etcd, the watch cache) and `validation` import nothing else of the apiserver;
- `registry`, `admission`, `auth` and `controllers` never import the front ends
  (`endpoints`), the options or the server;
- the front ends import the pipeline (`endpoints.pipeline`, `request`, ...), not each
  other, and the pipeline imports neither front end;
- only `__main__` imports the server.

And no module imports itself in a circle, through any others.

Every import counts, including those inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FORBIDDEN", "ALLOWED", "Violation", "violations", "cycles"]

ROOT = Path(__file__).resolve().parents[1]

COMPONENTS = frozenset({"apiserver", "scheduler", "kubelet", "cri", "cni", "cluster", "controllers", "proxy",
                        "netpol", "ingress", "clusterdns", "csi", "metricsserver"})
OURS = COMPONENTS | {"kubeling", "protos", "bench", "tests"}
_APISERVER_FRONT = frozenset({"apiserver.endpoints.grpc", "apiserver.endpoints.rest"})
_ABOVE_REGISTRY = frozenset({"apiserver.endpoints", "apiserver.options", "apiserver.server", "apiserver.__main__"})

# importer (a package or module, dotted) -> what it must not import (dotted prefixes).
# Its own modules are not forbidden to it: apiserver.storage may import apiserver.storage.*
# though it may import nothing else of the apiserver.
FORBIDDEN: dict[str, frozenset[str]] = {
    "kubeling": COMPONENTS | {"bench", "tests"},
    "scheduler": COMPONENTS - {"scheduler"} | {"bench", "tests"},
    "kubelet": COMPONENTS - {"kubelet", "cri", "cni"} | {"bench", "tests"},
    "cri": COMPONENTS - {"cri", "cni"} | {"bench", "tests"},
    "controllers": COMPONENTS - {"controllers"} | {"bench", "tests"},
    "proxy": COMPONENTS - {"proxy"} | {"bench", "tests"},
    "netpol": COMPONENTS - {"netpol"} | {"bench", "tests"},
    "ingress": COMPONENTS - {"ingress"} | {"bench", "tests"},
    "clusterdns": COMPONENTS - {"clusterdns"} | {"bench", "tests"},
    "metricsserver": COMPONENTS - {"metricsserver"} | {"bench", "tests"},
    "cni": COMPONENTS - {"cni"} | {"bench", "tests"},
    "csi": COMPONENTS - {"csi"} | {"bench", "tests"},
    "apiserver": COMPONENTS - {"apiserver"} | {"bench", "tests"},
    "protos": OURS - {"protos"},
    "bench": frozenset({"cluster"}),
    "apiserver.storage": frozenset({"apiserver"}),
    "apiserver.validation": frozenset({"apiserver"}),
    "apiserver.registry": _ABOVE_REGISTRY | {"apiserver.controllers"},
    "apiserver.admission": _ABOVE_REGISTRY | {"apiserver.controllers"},
    "apiserver.auth": _ABOVE_REGISTRY | {"apiserver.controllers"},
    "apiserver.controllers": _ABOVE_REGISTRY | {"apiserver.admission"},
    "apiserver.endpoints": _APISERVER_FRONT | {"apiserver.options", "apiserver.server", "apiserver.controllers"},
    "apiserver.endpoints.grpc": frozenset({"apiserver.endpoints.rest"}),
    "apiserver.endpoints.rest": frozenset({"apiserver.endpoints.grpc"}),
    "apiserver.options": frozenset({"apiserver.server", "apiserver.endpoints"}),
    "apiserver.server": frozenset({"apiserver.__main__"}),
}
# importer -> what it may import although a rule above forbids it
ALLOWED: dict[str, frozenset[str]] = {
    "bench": frozenset({"cluster.etcd"}),  # the etcd launcher `kubeling up` uses
}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}"


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, module, the names imported from it) of every absolute import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, tuple(a.name for a in node.names)


def _sources(root: Path) -> Iterator[tuple[str, Path]]:
    for package in sorted(OURS):
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else ():
            if "_pb2" not in path.name:
                yield _module_name(root, path), path


def violations(root: Path = ROOT) -> list[Violation]:
    out = []
    for module, path in _sources(root):
        rules = [(key, forbidden) for key, forbidden in FORBIDDEN.items() if _within(module, key)]
        allowed = [a for key, names in ALLOWED.items() if _within(module, key) for a in names]
        for line, imported, _ in _imports(ast.parse(path.read_text(), str(path))):
            for key, forbidden in rules:
                if any(_within(imported, f) and not (_within(imported, key) and _within(module, f))
                       for f in forbidden) and not any(_within(imported, a) for a in allowed):
                    out.append(Violation(str(path.relative_to(root)), line, imported))
                    break
    return out


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Circles of imports between modules (`from pkg import mod` counts as an import of
    pkg.mod; importing a package's names, of its __init__)."""
    sources = dict(_sources(root))
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        deps: set[str] = set()
        for _, imported, names in _imports(ast.parse(path.read_text(), str(path))):
            submodules = {f"{imported}.{n}" for n in names if f"{imported}.{n}" in sources}
            deps |= submodules
            if imported in sources and (not names or len(submodules) < len(names)):
                deps.add(imported)
        graph[module] = deps - {module}
    # Tarjan's strongly connected components, iteratively (no recursion limit to meet).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    found = violations()
    circles = cycles()
    for violation in found:
        print(violation)
    for circle in circles:
        print("import circle: " + " -> ".join(circle))
    print(f"import rules: {len(found)} violation(s), {len(circles)} circle(s)" if found or circles
          else "import rules: ok")
    return 1 if found or circles else 0


if __name__ == "__main__":
    sys.exit(main())
