"""List: the revision it read at, selectors, limit and continue, consistent lists from the cache."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from apiserver.endpoints.rest.protobuf import PROTOBUF, decode_envelope
from apiserver.server import APIServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.objects import namespace, pod


async def test_list_returns_revision_and_selectors(client: Client) -> None:
    await client.namespaces.create(namespace("other"))
    await client.pods.create(pod("a", labels={"app": "web", "tier": "front"}, node="n1"))
    await client.pods.create(pod("b", labels={"app": "web", "tier": "back"}))
    last = await client.pods.create(pod("c", namespace="other", labels={"app": "db"}, node="n1"))
    page = await client.pods.list("")
    assert sorted(p.metadata.name for p in page.items) == ["a", "b", "c"]
    assert int(page.metadata.resourceVersion) >= int(last.metadata.resourceVersion)

    async def names(**kw: Any) -> list[str]:
        ns = kw.pop("namespace", "")
        return sorted(p.metadata.name for p in (await client.pods.list(ns, **kw)).items)

    assert await names(namespace="default") == ["a", "b"]
    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app in (web,db),tier!=back") == ["a", "c"]
    assert await names(label_selector="!tier") == ["c"]
    assert await names(field_selector="spec.nodeName=n1") == ["a", "c"]
    assert await names(field_selector="spec.nodeName=") == ["b"]
    assert await names(field_selector="metadata.namespace=other") == ["c"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    assert await names(field_selector="status.phase=Pending,spec.nodeName!=n1") == ["b"]
    # From the watch cache, not older than the last write: the same answers.
    rv = last.metadata.resourceVersion
    assert await names(label_selector="app=web", resource_version=rv) == ["a", "b"]
    assert await names(field_selector="spec.nodeName=n1", resource_version=rv) == ["a", "c"]
    # "0" is any recent state: it may lag, but not beyond what was there when it answered.
    assert set(await names(resource_version="0")) <= {"a", "b", "c"}


async def test_bad_selectors_are_bad_requests(client: Client) -> None:
    with pytest.raises(errors.BadRequest, match="field label not supported"):
        await client.pods.list(field_selector="spec.color=red")
    with pytest.raises(errors.BadRequest):
        await client.pods.list(label_selector="a in (")
    with pytest.raises(errors.BadRequest):
        await client.pods.list(continue_token="garbage")
    with pytest.raises(errors.BadRequest):
        await client.pods.list(resource_version="abc")


async def test_limit_and_continue_read_one_revision(client: Client) -> None:
    for i in range(7):
        await client.pods.create(pod(f"p{i}", labels={"even": str(i % 2 == 0).lower()}))
    first = await client.pods.list(limit=3)
    assert [p.metadata.name for p in first.items] == ["p0", "p1", "p2"]
    token = getattr(first.metadata, "continue")
    assert token and first.metadata.remainingItemCount == 4
    # Writes after the first page do not show up in later pages: one consistent snapshot.
    await client.pods.create(pod("p9"))
    await client.pods.delete("p5")
    names = [p.metadata.name for p in first.items]
    while token:
        page = await client.pods.list(limit=3, continue_token=token)
        assert page.metadata.resourceVersion == first.metadata.resourceVersion
        names += [p.metadata.name for p in page.items]
        token = getattr(page.metadata, "continue")
    assert names == [f"p{i}" for i in range(7)]
    # With a selector, pages are filled with matching items.
    evens = await client.pods.list(limit=2, label_selector="even=true")
    assert [p.metadata.name for p in evens.items] == ["p0", "p2"]
    rest = await client.pods.list(limit=2, label_selector="even=true",
                                  continue_token=getattr(evens.metadata, "continue"))
    assert [p.metadata.name for p in rest.items] == ["p4", "p6"]
    items, _ = await client.pods.list_all(page_size=2)
    assert len(items) == 7  # p0..p9 minus p5 plus p9


async def test_lists_from_the_cache_read_your_writes_in_every_format(rest: APIServer) -> None:
    """A LIST without a resourceVersion or limit is served from the watch cache once it has
    seen etcd's current revision (upstream's consistent list from the cache): every write is
    in the next list, and the encodings the cache keeps per object follow every change."""
    lists = "/api/v1/namespaces/default/configmaps"
    protobuf = {"Accept": f"{PROTOBUF}, application/json"}
    async with Client(rest.address) as c, aiohttp.ClientSession(f"http://{rest.rest_address}") as http:
        for round_ in range(6):
            cm = core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name="cm", namespace="default"),
                                    data={"n": str(round_)})
            if round_ == 0:
                written = await c.configmaps.create(cm)
            else:
                cm.metadata.resourceVersion = written.metadata.resourceVersion
                written = await c.configmaps.update(cm)
            async with http.get(lists) as r:
                as_json = await r.json()
            async with http.get(lists, headers=protobuf) as r:
                as_protobuf = decode_envelope(await r.read())
            for listed in (as_json, as_protobuf):
                assert int(listed["metadata"]["resourceVersion"]) >= int(written.metadata.resourceVersion)
                assert [(i["metadata"]["name"], i["data"]) for i in listed["items"]] == [("cm", {"n": str(round_)})]
        await c.configmaps.delete("cm", "default")
        async with http.get(lists) as r:
            assert (await r.json())["items"] == []
        async with http.get(lists, headers=protobuf) as r:
            assert decode_envelope(await r.read()).get("items", []) == []  # no items: nothing on the wire
