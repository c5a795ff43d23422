"""The JSON storage codec (custom resources, CustomResourceDefinitions): what it reads back
from etcd, and its cache of parsed objects keyed by key and revision."""

from __future__ import annotations

import json

from apiserver.registry import strategy_for
from apiserver.registry.generic.codec import JsonCodec, codec_for
from apiserver.storage.etcd import KV
from kubeling import scheme
from kubeling.dynamic import content_of


def _kv(revision: int, group: str) -> KV:
    value = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": f"things.{group}", "uid": "u1"}, "spec": {"group": group}}
    return KV(b"/registry/apiextensions.k8s.io/customresourcedefinitions/things", json.dumps(value).encode(),
              revision, 5)


def test_a_revision_is_parsed_once_and_each_reader_gets_its_own_copy() -> None:
    codec = codec_for(strategy_for(scheme.CUSTOMRESOURCEDEFINITIONS))
    assert isinstance(codec, JsonCodec)
    first = codec.decode(_kv(7, "a.example.com"))
    assert first.metadata.resourceVersion == "7" and content_of(first)["spec"] == {"group": "a.example.com"}
    first.metadata.name = "changed by a reader"
    # the same key at the same revision: the cached parse, not the reader's changed copy
    again = codec.decode(_kv(7, "ignored: a revision's value never changes"))
    assert again.metadata.name == "things.a.example.com" and content_of(again)["spec"]["group"] == "a.example.com"
    # a later revision of the key is parsed afresh
    later = codec.decode(_kv(8, "b.example.com"))
    assert later.metadata.resourceVersion == "8" and content_of(later)["spec"]["group"] == "b.example.com"


def test_the_cache_is_bounded() -> None:
    codec = codec_for(strategy_for(scheme.CUSTOMRESOURCEDEFINITIONS))
    assert isinstance(codec, JsonCodec)
    codec.DECODED_MAX = 3
    for i in range(10):
        kv = _kv(i + 1, "a.example.com")
        codec.decode(KV(kv.key + str(i).encode(), kv.value, kv.mod_revision, kv.create_revision))
    assert len(codec._decoded) == 3
