"""deploy/docker-compose.yml, checked without a Docker engine: Debian's docker-compose
validates and renders it, and every component's command line must parse with that
component's own argument parser (etcd's flags must be in `etcd --help`)."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubelet.__main__ import make_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    rendered = subprocess.run(["docker-compose", "-f", str(ROOT / "deploy" / "docker-compose.yml"), "config"],
                              capture_output=True, text=True, check=True, timeout=60)
    return yaml.safe_load(rendered.stdout)["services"]


def test_every_component_command_parses_with_its_own_parser(services: dict[str, Any]) -> None:
    modules: dict[str, list[str]] = {}
    for name, service in services.items():
        command = service.get("command")
        if not command or command[:2] != ["python", "-m"]:
            continue
        module, argv = command[2], command[3:]
        parser = importlib.import_module(f"{module}.__main__").build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"service {name}: {module} refuses {argv}")
        if module == "kubelet":
            make_config(args)  # values too, not only flag names
        modules.setdefault(module, []).append(name)
    assert sorted(modules) == ["apiserver", "kubelet", "scheduler"]
    assert len(modules["scheduler"]) == 2 and len(modules["kubelet"]) == 2


def test_etcd_flags_exist(services: dict[str, Any]) -> None:
    command = services["etcd"]["command"]
    help_text = subprocess.run(["etcd", "--help"], capture_output=True, text=True, timeout=30).stdout
    flags = [arg for arg in command[1:] if arg.startswith("--")]
    assert flags and all(f"{flag} " in help_text or f"{flag}\n" in help_text for flag in flags), flags


def test_start_order_health_and_tracing(services: dict[str, Any]) -> None:
    assert services["apiserver"]["depends_on"]["etcd"]["condition"] == "service_healthy"
    for name in ("scheduler-1", "scheduler-2", "kubelet-1", "kubelet-2"):
        assert services[name]["depends_on"]["apiserver"]["condition"] == "service_healthy"
    for name in ("etcd", "apiserver", "scheduler-1"):
        assert "healthcheck" in services[name]
    for name in ("apiserver", "scheduler-1", "scheduler-2", "kubelet-1", "kubelet-2"):
        env = services[name]["environment"]
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317" and env["OTEL_SERVICE_NAME"]
    assert services["kubelet-1"]["privileged"] is True
    assert {"16686:16686", "4317:4317"} <= {f"{p['published']}:{p['target']}" if isinstance(p, dict) else p
                                           for p in services["jaeger"]["ports"]}
