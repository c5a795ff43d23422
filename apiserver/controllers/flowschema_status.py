"""Each FlowSchema's `Dangling` condition (upstream's APF configuration controller): whether
the priority level it names exists — a schema that names none sends its requests to the
catch-all level, and says so."""

from __future__ import annotations

import logging
from typing import Any

from apiserver.controllers.crd_naming import set_condition
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from kubeling.periodic import Periodic

__all__ = ["FlowSchemaStatus"]

log = logging.getLogger(__name__)


class FlowSchemaStatus:
    def __init__(self, schemas: Registry[Any], levels: Registry[Any], interval: float = 1.0) -> None:
        self.schemas = schemas
        self.levels = levels
        self._loop = Periodic("flowschema-status", interval, self.sync)
        self._seen: tuple[int, int] = (-1, -1)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        schemas, levels = self.schemas.watch_cache, self.levels.watch_cache
        seen = (schemas.changes, levels.changes)
        if seen == self._seen or not schemas.ready.is_set() or not levels.ready.is_set():
            return
        self._seen = seen
        present = {e.obj.metadata.name for e in levels.store.values()}
        for entry in list(schemas.store.values()):
            schema = type(entry.obj)()
            schema.CopyFrom(entry.obj)
            content = content_of(schema)
            level = ((content.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name", "")
            if level in present:
                changed = set_condition(content.setdefault("status", {}), "Dangling", "False", "Found",
                                        f'This FlowSchema references the PriorityLevelConfiguration object named '
                                        f'"{level}" and it exists')
            else:
                changed = set_condition(content.setdefault("status", {}), "Dangling", "True", "NotFound",
                                        f'This FlowSchema references the PriorityLevelConfiguration object named '
                                        f'"{level}" but there is no such object')
            if not changed:
                continue
            set_content(schema, content)
            try:
                await self.schemas.update(schema, status=True)
            except (errors.Conflict, errors.NotFound):
                self._seen = (-1, -1)  # look again at the next pass
