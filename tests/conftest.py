"""Shared fixtures: a real etcd per session, a real apiserver per test.

Each test's apiserver gets its own etcd key prefix, so tests share one etcd
without seeing each other's objects. Tests that compact etcd start their own etcd.

Tests that change or inspect what the whole machine shares (network namespaces, bridges,
iptables, runc containers, mounts: the CNI, CRI, kube-proxy, network policy and route tests
and every e2e test) are marked `host`: `make test` runs them one at a time, and the others,
which touch only their own etcd prefix, processes and ports, side by side (pytest-xdist).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from apiserver.server import APIServer, Config
from cluster.etcd import EtcdServer
from kubeling.client import Client

_prefixes = itertools.count()
# What touches the machine's shared state, by path under tests/.
_HOST_STATE = ("contract/cni/", "contract/cri/", "contract/csi/", "contract/test_proxy.py",
               "contract/test_netpol_controller.py", "contract/test_pod_routes.py", "e2e/")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "host: changes or inspects state the whole machine shares; run alone")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0].removeprefix("tests/")
        if path.startswith(_HOST_STATE):
            item.add_marker(pytest.mark.host)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every phase's duration, for `python -m tests.slowest` across the suite's runs."""
    record = os.environ.get("KUBELING_DURATIONS")
    if record and report.duration >= 0.005 and "PYTEST_XDIST_WORKER" not in os.environ:  # once: where reports meet
        with open(record, "a") as out:
            out.write(json.dumps({"test": report.nodeid, "when": report.when, "seconds": report.duration,
                                  "outcome": report.outcome}) + "\n")


@pytest.fixture(scope="session", autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`kubeling up` records its cluster's name under $KUBELING_HOME and merges a context into
    $KUBECONFIG's file (~/.kubeling, ~/.kube/config): tests use a directory of their own
    for both, never the machine user's."""
    home = tmp_path_factory.mktemp("home")
    saved = {key: os.environ.get(key) for key in ("KUBELING_HOME", "KUBECONFIG")}
    os.environ["KUBELING_HOME"] = str(home / ".kubeling")
    os.environ["KUBECONFIG"] = str(home / ".kube" / "config")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def etcd() -> Iterator[EtcdServer]:
    server = EtcdServer().start()
    try:
        yield server
    finally:
        server.stop()


def apiserver_config(etcd: EtcdServer, prefix: str, **overrides: object) -> Config:
    cfg = Config(etcd=etcd.endpoint, listen="127.0.0.1:0", etcd_prefix=prefix,
                 compaction_interval=0, bookmark_interval=0.2, namespace_finalize_interval=0.1)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


@pytest.fixture
def prefix() -> str:
    return f"/t{next(_prefixes)}/registry"


@pytest.fixture
async def apiserver(etcd: EtcdServer, prefix: str) -> AsyncIterator[APIServer]:
    server = APIServer(apiserver_config(etcd, prefix))
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace=0)


@pytest.fixture
async def client(apiserver: APIServer) -> AsyncIterator[Client]:
    c = Client(apiserver.address)
    try:
        yield c
    finally:
        await c.close()
