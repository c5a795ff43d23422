"""The import rules hold for the tree, and the checker finds an import that breaks one."""

from __future__ import annotations

from pathlib import Path

from tests.import_rules import cycles, violations


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


def test_the_apiserver_layers_and_circles(tmp_path: Path) -> None:
    files = {
        "apiserver/storage/a.py": "from apiserver.storage import b\nfrom apiserver.registry.generic import store\n",
        "apiserver/storage/b.py": "",
        "apiserver/endpoints/pipeline.py": "from apiserver.endpoints.rest import server\n",
        "apiserver/endpoints/rest/server.py": "from apiserver.endpoints.rest import handlers\n"
                                              "from apiserver.endpoints.grpc import handlers as g\n"
                                              "from apiserver.endpoints import pipeline\n",
        "kubeling/x.py": "from kubeling import y\n",
        "kubeling/y.py": "def f():\n    import kubeling.x\n",
        "bench/b.py": "from cluster.etcd import EtcdServer\nfrom cluster import plan\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert sorted(str(v) for v in violations(tmp_path)) == [
        "apiserver/endpoints/pipeline.py:1: imports apiserver.endpoints.rest",
        "apiserver/endpoints/rest/server.py:2: imports apiserver.endpoints.grpc",
        "apiserver/storage/a.py:2: imports apiserver.registry.generic",
        "bench/b.py:2: imports cluster"]
    assert sorted(cycles(tmp_path)) == [["apiserver.endpoints.pipeline", "apiserver.endpoints.rest.server"],
                                ["kubeling.x", "kubeling.y"]]


def test_the_tree_has_no_import_circle() -> None:
    assert cycles() == []
