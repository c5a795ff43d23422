"""deploy/docker-compose.yml, checked without a Docker engine (the fast check; the real
deployment is tests/e2e/test_compose.py): Debian's docker-compose validates and renders it
with the OTLP override, and every component's command line must parse with that
component's own argument parser (etcd's flags must be in `etcd --help`)."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubelet.config import from_command_line as make_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBELING_")}  # the file's defaults
    rendered = subprocess.run(["docker-compose", "-f", str(ROOT / "deploy" / "docker-compose.yml"),
                               "-f", str(ROOT / "deploy" / "docker-compose.otlp.yml"), "config"],
                              capture_output=True, text=True, check=True, timeout=60, env=env)
    return yaml.safe_load(rendered.stdout)["services"]


def _argv(service: dict[str, Any]) -> list[str]:
    """The command line a service runs: a `sh -c "exec ..."` one with its environment's
    values and each command substitution as a placeholder path."""
    command: list[str] = service.get("command") or []
    if command[:2] != ["sh", "-c"]:
        return command
    script = command[2].replace("$$", "$")
    script = re.sub(r'"\$\(.*?\)"', "/placeholder", script)
    script = re.sub(r"\$(\w+)", lambda m: str(service.get("environment", {})[m.group(1)]), script)
    words = shlex.split(script)
    assert words[0] == "exec", script
    return words[1:]


def test_every_component_command_parses_with_its_own_parser(services: dict[str, Any]) -> None:
    modules: dict[str, list[str]] = {}
    for name, service in services.items():
        command = _argv(service)
        if not command or command[:2] != ["python", "-m"]:
            continue
        module, argv = command[2], command[3:]
        entry = importlib.import_module(module)
        if not hasattr(entry, "build_parser"):  # a package: its __main__ has the parser
            entry = importlib.import_module(f"{module}.__main__")
        parser = entry.build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"service {name}: {module} refuses {argv}")
        if module == "kubelet":
            config = make_config(args)  # values too, not only flag names
            assert config.pod_routes and config.cgroup_root == "/placeholder"
            assert config.node_network == "172.28.0.0/24"  # the ingress controller's clients answered
            assert config.node_ip == service["networks"]["cluster"]["ipv4_address"]
        modules.setdefault(module, []).append(name)
    assert sorted(modules) == ["apiserver", "cluster", "cluster.otlpreceiver", "clusterdns", "clusterdns.addon",
                              "controllers", "ingress", "ingress.addon", "kubelet", "metricsserver",
                              "metricsserver.addon", "netpol", "proxy", "scheduler"]
    assert len(modules["scheduler"]) == 2 and len(modules["kubelet"]) == 2 and len(modules["proxy"]) == 2
    assert len(modules["netpol"]) == 2


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
    for name in ("kubelet-1", "kubelet-2"):  # what runc, netns and CNI need, without `privileged`
        kubelet = services[name]
        assert "privileged" not in kubelet and kubelet["cap_add"] == ["ALL"] and kubelet["cap_drop"] == ["SYS_RESOURCE"]
        assert "/sys/fs/cgroup:/sys/fs/cgroup:rw" in kubelet["volumes"] and kubelet["tmpfs"] == ["/run"]
    # Published on loopback only: the API has no authentication yet.
    published = [p for service in services.values() for p in service.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published), published
    assert set(services["apiserver"]["ports"]) == {"127.0.0.1:6443:6443/tcp", "127.0.0.1:8080:8080/tcp"}
    assert services["jaeger"]["command"][:3] == ["python", "-m", "cluster.otlpreceiver"]  # the override


def test_the_image_has_every_package_the_project_installs() -> None:
    """deploy/Dockerfile copies each top-level package pyproject.toml installs (a new one
    forgotten there breaks every container that imports it, found only by the compose test)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(re.findall(r"^COPY (\w+) \1$", (ROOT / "deploy" / "Dockerfile").read_text(), re.MULTILINE))
    assert packages - {"tests"} <= copied, f"not copied into the image: {sorted(packages - {'tests'} - copied)}"
