"""The names a CustomResourceDefinition may use, and when it is established (upstream's
apiextensions-apiserver naming and establishing controllers): a definition's requested
names are accepted unless another definition of its group holds one of them already
(NamesAccepted False, with upstream's reasons), and once this apiserver serves them the
definition is Established."""

from __future__ import annotations

import logging
from typing import Any

from apiserver.registry.apiextensions.definition import condition
from apiserver.registry.apiextensions.serving import CustomResourceServing
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from kubeling.kjson import format_time
from kubeling.periodic import Periodic
from kubeling.timestamps import now
from protos.kubeling.v1 import custom_pb2

__all__ = ["CRDNaming", "accepted_names", "set_condition"]

log = logging.getLogger(__name__)

CRD = custom_pb2.CustomResource
_NAMES = ("plural", "singular", "shortNames", "kind", "listKind", "categories")


def set_condition(status: dict[str, Any], kind: str, state: str, reason: str, message: str) -> bool:
    """Set one condition (its lastTransitionTime moves only with its status); True when changed."""
    conditions = status.setdefault("conditions", [])
    current = condition(status, kind)
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == \
            (state, reason, message):
        return False
    stamp = format_time(now())
    if current is None:
        conditions.append({"type": kind, "status": state, "lastTransitionTime": stamp, "reason": reason,
                           "message": message})
    else:
        if current.get("status") != state:
            current["lastTransitionTime"] = stamp
        current.update(status=state, reason=reason, message=message)
    return True


def accepted_names(requested: dict[str, Any], others: list[dict[str, Any]]) -> tuple[str, str]:
    """(reason, message) of the first conflict of the requested names with the names the
    group's other definitions hold (upstream's checks, in their order), ("", "") if none."""
    plurals = {o.get("plural") for o in others} | {o.get("singular") for o in others}
    kinds = {o.get("kind") for o in others} | {o.get("listKind") for o in others}
    shorts = {s for o in others for s in o.get("shortNames") or []}
    if requested.get("plural") in plurals:
        return "PluralConflict", f'"{requested.get("plural")}" is already in use'
    if requested.get("singular") in plurals:
        return "SingularConflict", f'"{requested.get("singular")}" is already in use'
    for short in requested.get("shortNames") or []:
        if short in shorts or short in plurals:
            return "ShortNamesConflict", f'"{short}" is already in use'
    if requested.get("kind") in kinds:
        return "KindConflict", f'"{requested.get("kind")}" is already in use'
    if requested.get("listKind") in kinds:
        return "ListKindConflict", f'"{requested.get("listKind")}" is already in use'
    return "", ""


class CRDNaming:
    def __init__(self, definitions: Registry[CRD], serving: CustomResourceServing, interval: float = 0.05,
                 serve_timeout: float = 30.0) -> None:
        self.definitions = definitions
        self.serving = serving
        self.serve_timeout = serve_timeout
        # A pass is cheap when nothing changed and every definition is judged: it returns
        # at once, so the loop may look often (a new CRD is judged within `interval`).
        self._seen = -1
        self._settled = False
        self._loop = Periodic("crd-naming", interval, self._pass)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        cache = self.definitions.watch_cache
        if not cache.ready.is_set() or (cache.changes == self._seen and self._settled):
            return
        self._seen = cache.changes
        crds = sorted((e.obj for e in cache.store.values()),
                      key=lambda c: (c.metadata.creationTimestamp.seconds, c.metadata.name))
        settled = True
        for crd in crds:
            try:
                await self._sync(crd, crds)
            except errors.ApiError as err:
                log.warning("customresourcedefinition %s: %s", crd.metadata.name, err.message)
                settled = False
            status = content_of(crd).get("status") or {}
            if (condition(status, "Established") or {}).get("status") != "True" and \
                    (condition(status, "NamesAccepted") or {}).get("status") != "False":
                settled = False  # still to be judged (a refused one is judged again when anything changes)
        self._settled = settled

    async def _sync(self, crd: CRD, all_crds: list[CRD]) -> None:
        content = content_of(crd)
        spec, status = content.get("spec") or {}, content.get("status") or {}
        group = spec.get("group")
        requested = {k: v for k, v in (spec.get("names") or {}).items() if k in _NAMES}
        others = []
        for other in all_crds:
            if other.metadata.name == crd.metadata.name:
                continue
            other_content = content_of(other)
            if (other_content.get("spec") or {}).get("group") == group:
                others.append((other_content.get("status") or {}).get("acceptedNames") or {})
        reason, message = accepted_names(requested, others)
        new_status: dict[str, Any] = {**status, "conditions": [dict(c) for c in status.get("conditions") or []]}
        if reason:
            changed = set_condition(new_status, "NamesAccepted", "False", reason, message)
            if (condition(new_status, "Established") or {}).get("status") != "True":
                changed |= set_condition(new_status, "Established", "False", "NotAccepted",
                                         "not all names are accepted")
        else:
            changed = new_status.get("acceptedNames") != requested
            new_status["acceptedNames"] = requested
            changed |= set_condition(new_status, "NamesAccepted", "True", "NoConflicts", "no conflicts found")
            if (condition(new_status, "Established") or {}).get("status") != "True" and not changed and \
                    await self.serving.wait_served(crd.metadata.name, crd.metadata.uid, self.serve_timeout):
                # written once this apiserver serves the names it accepted a pass ago
                changed |= set_condition(new_status, "Established", "True", "InitialNamesAccepted",
                                         "the initial names have been accepted")
        if not changed:
            return
        updated = CRD()
        updated.CopyFrom(crd)
        content["status"] = new_status
        set_content(updated, content)
        try:
            written = await self.definitions.update(updated, status=True)
        except (errors.Conflict, errors.NotFound):
            return  # changed meanwhile: the next pass judges the new one
        if not reason and (condition(new_status, "Established") or {}).get("status") != "True":
            # names just accepted: judged again at once, so Established follows as soon as
            # this apiserver serves them (rather than a pass later)
            await self._sync(written, all_crds)
