"""Conversion between a custom resource's versions (upstream's apiextensions-apiserver
pkg/apiserver/conversion): `None` rewrites apiVersion (the codec does it), `Webhook` sends
a ConversionReview (v1, else v1beta1, as the definition lists them) over HTTPS to a URL or
a Service (on its ClusterIP, as kube-apiserver reaches webhooks by default), verified with
the definition's caBundle, and checks the answer as upstream does: the request's uid, a
Success result, as many objects as were sent, each in the desired version, of the same
kind, name, namespace and uid; only labels and annotations of metadata may change."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from kubeling import errors, names

__all__ = ["WebhookConverter", "ServiceAddress"]

# (namespace, name, port) of a Service -> the host:port its ClusterIP answers on.
ServiceAddress = Callable[[str, str, int], Awaitable[str]]
_REVIEW_VERSIONS = ("v1", "v1beta1")


@dataclass
class WebhookConverter:
    kind: str  # for messages: "example.com/v1, Kind=Widget"
    group: str
    config: dict[str, Any]  # spec.conversion.webhook
    service_address: ServiceAddress
    timeout: float = 30.0

    def _review_version(self) -> str:
        listed = self.config.get("conversionReviewVersions") or []
        return next((v for v in listed if v in _REVIEW_VERSIONS), "v1")

    async def _url(self) -> str:
        client = self.config.get("clientConfig") or {}
        if client.get("url"):
            return str(client["url"])
        service = client.get("service") or {}
        address = await self.service_address(service.get("namespace", ""), service.get("name", ""),
                                             int(service.get("port") or 443))
        return f"https://{address}{service.get('path') or ''}"

    def _ssl(self) -> ssl.SSLContext:
        bundle = (self.config.get("clientConfig") or {}).get("caBundle")
        context = ssl.create_default_context()
        if bundle:
            try:
                context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
            except (ValueError, ssl.SSLError) as err:
                raise self._failed(f"caBundle is not a PEM certificate bundle: {err}") from None
        return context

    def _failed(self, why: str, what: str = "") -> errors.InternalError:
        return errors.InternalError(f"conversion webhook for {what or self.kind} failed: {why}")

    async def convert(self, objects: list[dict[str, Any]], desired: str) -> list[dict[str, Any]]:
        """The objects in the desired apiVersion (those already in it are not sent)."""
        todo = [i for i, o in enumerate(objects) if o.get("apiVersion") != desired]
        if not todo:
            return objects
        what = f"{objects[todo[0]].get('apiVersion')}, Kind={self.kind}"
        uid = str(uuid.uuid4())
        version = self._review_version()
        review = {"apiVersion": f"apiextensions.k8s.io/{version}", "kind": "ConversionReview",
                  "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [objects[i] for i in todo]}}
        url = await self._url()
        try:
            async with asyncio.timeout(self.timeout), aiohttp.ClientSession() as session, \
                    session.post(url, json=review, ssl=self._ssl()) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise self._failed(f"the server answered {resp.status}: {body[:200]!r}", what)
        except TimeoutError:
            raise self._failed(f"Post \"{url}\": context deadline exceeded ({self.timeout:g}s)", what) from None
        except aiohttp.ClientError as err:
            raise self._failed(f"Post \"{url}\": {err}", what) from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise self._failed("the answer is not JSON", what) from None
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict):
            raise self._failed("no response in the ConversionReview", what)
        if response.get("uid") != uid:
            raise self._failed(f"expected response.uid={uid!r}, got {response.get('uid')!r}", what)
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise self._failed(str(result.get("message") or "the webhook did not say Success"), what)
        converted = response.get("convertedObjects")
        if not isinstance(converted, list) or len(converted) != len(todo):
            count = len(converted) if isinstance(converted, list) else 0
            raise errors.InternalError(f"conversion webhook for {what} returned {count} objects, expected {len(todo)}")
        out = list(objects)
        for index, (i, obj) in enumerate(zip(todo, converted, strict=True)):
            out[i] = self._checked(objects[i], obj, desired, index, what)
        return out

    def _checked(self, original: dict[str, Any], converted: Any, desired: str, index: int,
                 what: str) -> dict[str, Any]:
        def invalid(why: str) -> errors.InternalError:
            return errors.InternalError(f"conversion webhook for {what} returned invalid converted object at "
                                        f"index {index}: {why}")
        if not isinstance(converted, dict):
            raise invalid("not an object")
        if converted.get("apiVersion") != desired:
            raise invalid(f"invalid groupVersion (expected {desired}, received {converted.get('apiVersion')})")
        if converted.get("kind") != original.get("kind"):
            raise invalid(f"invalid kind (expected {original.get('kind')}, received {converted.get('kind')})")
        meta, before = converted.get("metadata"), original.get("metadata") or {}
        if not isinstance(meta, dict):
            raise invalid("missing metadata in converted object")
        for key in ("name", "namespace", "uid"):
            if meta.get(key, "") != before.get(key, ""):
                raise invalid(f"must have the same {key if key != 'uid' else 'UID'}: {before.get(key, '')} != "
                              f"{meta.get(key, '')}")
        restored = copy.deepcopy(before)
        for key in ("labels", "annotations"):
            value = meta.get(key)
            if value is None:
                restored.pop(key, None)
                continue
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise invalid(f"metadata.{key} must be a map of strings")
            if key == "labels":
                bad = [m for k, v in value.items() for m in (*names.qualified_name(k), *names.label_value(v))]
                if bad:
                    raise invalid(f"metadata.labels: {bad[0]}")
            restored[key] = value
        return {**converted, "metadata": restored}
