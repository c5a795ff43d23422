"""The import rules hold for the tree, and the checker finds an import that breaks one."""

from __future__ import annotations

from pathlib import Path

from tests.import_rules import violations


def test_the_tree_keeps_the_import_rules() -> None:
    assert [str(v) for v in violations()] == []


def test_a_forbidden_import_is_found_even_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "kubeling").mkdir()
    (tmp_path / "kubeling" / "ok.py").write_text("import json\nfrom kubeling import errors\nimport protos.x\n")
    (tmp_path / "kubeling" / "bad.py").write_text("def f():\n    from kubelet.agent import Agent\n")
    (tmp_path / "scheduler").mkdir()
    (tmp_path / "scheduler" / "bad.py").write_text("import apiserver.server as s\n")
    (tmp_path / "cni").mkdir()
    (tmp_path / "cni" / "bad.py").write_text("from kubelet import runtime\nfrom kubeling import telemetry\n")
    (tmp_path / "protos").mkdir()
    (tmp_path / "protos" / "bad.py").write_text("from kubeling.kjson import dumps\n")
    found = sorted(str(v) for v in violations(tmp_path))
    assert found == ["cni/bad.py:1: imports kubelet", "kubeling/bad.py:2: imports kubelet.agent",
                     "protos/bad.py:1: imports kubeling.kjson", "scheduler/bad.py:1: imports apiserver.server"]
