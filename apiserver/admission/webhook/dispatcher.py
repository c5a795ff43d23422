"""The two admission plugins that call webhooks (upstream's MutatingAdmissionWebhook and
ValidatingAdmissionWebhook): which webhooks a write must be sent to (rules, matchPolicy,
namespaceSelector, objectSelector, matchConditions), how the answer counts (a refusal, a
JSON patch applied to the object before it is validated, warnings, audit annotations),
and what a failure means (failurePolicy Fail refuses the write, Ignore lets it through).

Mutating webhooks run one after another, each seeing what the ones before it made; one
whose reinvocationPolicy is IfNeeded runs again once when a later one changed the object.
Validating webhooks run concurrently. A dry run is refused by a matching webhook whose
sideEffects are not None or NoneOnDryRun, as upstream.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission import celenv
from apiserver.admission.chain import DELETE, EVERY_RESOURCE, AdmissionAttributes, add_warning, audit_annotations
from apiserver.admission.request import admission_request, equivalents, is_exempt, labels_of
from apiserver.admission.webhook.client import CallError, WebhookClient
from apiserver.admission.webhook.source import Webhook
from kubeling import errors
from kubeling.kjson import from_json
from kubeling.patches import json_patch
from kubeling.scheme import ResourceType

__all__ = ["MutatingWebhooks", "ValidatingWebhooks", "status_error"]

log = logging.getLogger(__name__)

_BY_CODE: dict[int, type[errors.ApiError]] = {
    400: errors.BadRequest, 401: errors.Unauthorized, 403: errors.Forbidden, 404: errors.NotFound,
    409: errors.Conflict, 410: errors.Expired, 413: errors.RequestEntityTooLarge, 422: errors.Invalid,
    429: errors.TooManyRequests, 500: errors.InternalError, 503: errors.ServiceUnavailable,
    504: errors.Timeout}


def status_error(webhook: str, status: Any) -> errors.ApiError:
    """Upstream's webhookerrors.ToStatusErr: a refusal, never below 400."""
    status = status if isinstance(status, dict) else {}
    denied = f'admission webhook "{webhook}" denied the request'
    message, reason = status.get("message") or "", status.get("reason") or ""
    text = f"{denied}: {message}" if message else f"{denied}: {reason}" if reason else \
        f"{denied} without explanation"
    code = status.get("code") if isinstance(status.get("code"), int) else 400
    err = _BY_CODE.get(max(code, 400), errors.BadRequest)(text)
    if reason and reason != err.reason:
        err.reason = reason  # the webhook's own StatusReason, as upstream passes it on
    err.metadata["code"] = str(max(code, 400))
    return err


def _failed(hook: Webhook, why: str) -> errors.ApiError:
    return errors.InternalError(f'Internal error occurred: failed calling webhook "{hook.name}": {why}')


NamespaceLabels = Callable[[str], Mapping[str, str] | None]


@dataclass
class _Base:
    source: Callable[[], tuple[Webhook, ...]]
    client: WebhookClient
    namespace_labels: NamespaceLabels  # from the watch cache; None: no such namespace
    served: Callable[[], Iterable[ResourceType[Any]]]  # every scheme entry (for matchPolicy Equivalent)
    resources: frozenset[str] = EVERY_RESOURCE

    def _matched_version(self, hook: Webhook, attrs: AdmissionAttributes) -> bool:
        kind = attrs.kind
        group, version = (kind.group, kind.version) if kind is not None else ("", "")
        if hook.rule_matches(attrs, group, version):
            return True
        return hook.match_policy == "Equivalent" and any(
            hook.rule_matches(attrs, g, v) for g, v in equivalents(kind, self.served()))

    def _selected(self, hook: Webhook, attrs: AdmissionAttributes) -> bool:
        if hook.object_selector is None or hook.namespace_selector is None:
            return False
        if hook.object_selector.requirements:
            labels = [labels_of(o) for o in (attrs.obj, attrs.old) if o is not None]
            if not any(hook.object_selector.matches(lab) for lab in labels):
                return False
        if not hook.namespace_selector.requirements:
            return True
        if attrs.resource == "namespaces" and attrs.kind is not None and not attrs.kind.group:
            return hook.namespace_selector.matches(labels_of(attrs.obj if attrs.obj is not None else attrs.old))
        if not attrs.namespace:
            return True  # other cluster-scoped objects: never skipped by a namespace selector
        namespace = self.namespace_labels(attrs.namespace)
        return namespace is not None and hook.namespace_selector.matches(namespace)

    def _conditions(self, hook: Webhook, attrs: AdmissionAttributes, request: dict[str, Any]) -> bool:
        """Whether every matchCondition is true (an error: the failure policy decides)."""
        if not hook.match_conditions:
            return True
        variables = {"object": request.get("object"), "oldObject": request.get("oldObject"),
                     "request": request, "authorizer": celenv.AUTHORIZER_VALUE}
        for cond in hook.match_conditions:
            try:
                result = celenv.evaluate(cond.get("expression", ""), variables)
            except celenv.EVAL_ERRORS as err:
                if hook.fails_open:
                    log.warning("webhook %s: match condition %s: %s; ignored", hook.name, cond.get("name"), err)
                    return False
                raise _failed(hook, f"failed to evaluate match condition {cond.get('name')!r}: {err}") from None
            if result is not True:
                return False
        return True

    def _hooks_for(self, attrs: AdmissionAttributes) -> list[Webhook]:
        if is_exempt(attrs):
            return []
        return [h for h in self.source() if self._matched_version(h, attrs) and self._selected(h, attrs)]

    async def _call(self, hook: Webhook, attrs: AdmissionAttributes,
                    request: dict[str, Any]) -> dict[str, Any] | None:
        """The webhook's response; None: it failed and fails open."""
        if attrs.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            raise errors.BadRequest(f"admission webhook {hook.name!r} has side effects and does not support dry "
                                    "run")
        try:
            response = await self.client.call(hook, request)
        except CallError as err:
            if hook.fails_open:
                log.warning("failed calling webhook %s (ignored, failurePolicy Ignore): %s", hook.name, err)
                return None
            raise _failed(hook, f"failed to call webhook: {err}") from None
        for warning in response.get("warnings") or []:
            if isinstance(warning, str) and warning:
                add_warning(warning)
        annotations = audit_annotations.get()
        if annotations is not None:
            for key, value in (response.get("auditAnnotations") or {}).items():
                annotations[f"{hook.configuration}/{key}"] = str(value)
        return response


def _request(attrs: AdmissionAttributes) -> dict[str, Any]:
    return admission_request(attrs, str(uuid.uuid4()))


@dataclass
class MutatingWebhooks(_Base):
    async def mutate(self, attrs: AdmissionAttributes) -> bool:
        hooks = self._hooks_for(attrs)
        if not hooks:
            return False
        request = _request(attrs)
        current = request["object"]
        called_before_change: list[Webhook] = []
        reinvoke: list[Webhook] = []
        for hook in hooks:
            changed = await self._mutate_once(hook, attrs, request)
            if changed:
                reinvoke.extend(h for h in called_before_change if h.reinvoke and h not in reinvoke)
                called_before_change.clear()
            called_before_change.append(hook)
        for hook in reinvoke:  # once, as upstream's reinvocation
            await self._mutate_once(hook, attrs, request)
        if request["object"] is not current and attrs.operation != DELETE and attrs.obj is not None:
            self._store(attrs, request["object"])
            return True
        return False

    async def _mutate_once(self, hook: Webhook, attrs: AdmissionAttributes, request: dict[str, Any]) -> bool:
        if not self._conditions(hook, attrs, request):
            return False
        request["uid"] = str(uuid.uuid4())
        response = await self._call(hook, attrs, request)
        if response is None:
            return False
        if not response["allowed"]:
            raise status_error(hook.name, response.get("status"))
        patch = response.get("patch")
        if not patch or attrs.operation == DELETE:
            return False
        try:
            operations = json.loads(base64.b64decode(patch))
            patched = json_patch(request["object"], operations)
        except (ValueError, errors.ApiError) as err:
            message = err.message if isinstance(err, errors.ApiError) else str(err)
            raise errors.InternalError(f'Internal error occurred: admission webhook "{hook.name}" '
                                       f"returned an invalid patch: {message}") from None
        if patched == request["object"]:
            return False
        request["object"] = patched
        return True

    @staticmethod
    def _store(attrs: AdmissionAttributes, patched: dict[str, Any]) -> None:
        """The patched JSON back into the object being written (upstream decodes it again;
        fields the type does not have are dropped, a wrong type refuses the write)."""
        obj = attrs.obj
        try:
            decoded = from_json(patched, type(obj), ignore=frozenset({"kind", "apiVersion"})
                                if attrs.kind is None or not attrs.kind.custom else frozenset()).message
        except errors.ApiError as err:
            raise errors.InternalError(f"Internal error occurred: the object a mutating webhook made cannot be "
                                       f"decoded: {err.message}") from None
        obj.CopyFrom(decoded)  # type: ignore[union-attr]


@dataclass
class ValidatingWebhooks(_Base):
    admits_connect = True  # asked of pods/exec, attach and portforward too

    async def validate(self, attrs: AdmissionAttributes) -> None:
        hooks = self._hooks_for(attrs)
        if not hooks:
            return
        request = _request(attrs)
        results = await asyncio.gather(*(self._validate_one(h, attrs, request) for h in hooks),
                                       return_exceptions=True)
        for result in results:  # the first refusal in the webhooks' order, as upstream reports it
            if isinstance(result, BaseException):
                raise result

    async def _validate_one(self, hook: Webhook, attrs: AdmissionAttributes, request: dict[str, Any]) -> None:
        if not self._conditions(hook, attrs, request):
            return
        response = await self._call(hook, attrs, {**request, "uid": str(uuid.uuid4())})
        if response is not None and not response["allowed"]:
            raise status_error(hook.name, response.get("status"))


