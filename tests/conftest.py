"""Shared fixtures: a real etcd per session, a real apiserver per test.

Each test's apiserver gets its own etcd key prefix, so tests share one etcd
without seeing each other's objects. Tests that compact etcd start their own etcd.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest

from apiserver.server import APIServer, Config
from cluster.etcd import EtcdServer
from kubeling.client import Client

_prefixes = itertools.count()


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
