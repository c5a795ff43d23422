"""Server-side apply with field ownership (`metadata.managedFields`), on Kubernetes JSON.

As upstream's structured-merge-diff, in its essentials: every write through the REST API
records which fields its manager set, as a FieldsV1 set (`{"f:spec": {"f:containers":
{"k:{\\"name\\":\\"main\\"}": {".": {}, "f:image": {}}}}}`). An apply of manager M

- conflicts (409) where it would change a field another manager owns, unless forced
  (then M takes the field over);
- removes the fields M applied before and no longer applies, unless another manager
  also owns them;
- merges the applied object in (lists merged by their merge keys), and records M's
  field set as its `Apply` entry.

Other writes (create, update, patch) make their manager own the fields they set or
changed (an `Update` entry) and take those fields from the others, without conflicts.
Status fields and server-owned metadata are not tracked; nor are gRPC writes (the
kubelet's and the scheduler's).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubeling import errors
from kubeling.patches import merge_key as list_merge_key
from kubeling.patches import strategic_merge_patch

__all__ = ["apply", "record_update", "field_paths"]

Obj = dict[str, Any]
Path = tuple[str, ...]

# Server-owned or identifying fields nobody owns (upstream resets these before tracking).
_IGNORED = {("f:apiVersion",), ("f:kind",), ("f:status",), ("f:metadata", "f:name"), ("f:metadata", "f:namespace"),
            ("f:metadata", "f:uid"), ("f:metadata", "f:resourceVersion"), ("f:metadata", "f:generation"),
            ("f:metadata", "f:creationTimestamp"), ("f:metadata", "f:managedFields"),
            ("f:metadata", "f:deletionTimestamp"), ("f:metadata", "f:deletionGracePeriodSeconds")}
_SCALAR_SETS = {("f:metadata", "f:finalizers")}  # lists of scalars owned element by element


def _key(item: Obj, merge_key: str) -> str:
    return "k:" + json.dumps({merge_key: item.get(merge_key)}, separators=(",", ":"))


def field_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """The leaf paths of `obj` as FieldsV1 names; a list element keyed by its merge key
    also owns itself (".")."""
    out: set[Path] = set()
    if not isinstance(obj, dict):
        return out
    for name, value in obj.items():
        path = (*prefix, f"f:{name}")
        if path in _IGNORED or value is None:
            continue
        merge_key = list_merge_key(name, ".".join(p[2:] for p in path if p.startswith("f:")))
        if isinstance(value, dict) and value:
            out |= field_paths(value, path)
        elif isinstance(value, list) and merge_key and all(isinstance(v, dict) for v in value):
            for item in value:
                element = (*path, _key(item, merge_key))
                out.add((*element, "."))
                out |= field_paths(item, element)
        elif isinstance(value, list) and path in _SCALAR_SETS:
            out |= {(*path, "v:" + json.dumps(v)) for v in value}
        else:
            out.add(path)  # a scalar, an empty object or an atomic list
    return out


def _to_fields_v1(paths: set[Path]) -> Obj:
    tree: Obj = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part, {})
    return tree


def _from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(tree, dict):
        return out
    for part, sub in tree.items():
        if isinstance(sub, dict) and sub:
            out |= _from_fields_v1(sub, (*prefix, part))
        else:
            out.add((*prefix, part))
    return out


def _step(node: Any, part: str) -> Any:
    """One step of a path into a JSON value (None when it is not there)."""
    if part.startswith("f:") and isinstance(node, dict):
        return node.get(part[2:])
    if part.startswith("k:") and isinstance(node, list):
        wanted = json.loads(part[2:])
        return next((v for v in node if isinstance(v, dict) and all(v.get(k) == x for k, x in wanted.items())), None)
    if part.startswith("v:") and isinstance(node, list):
        value = json.loads(part[2:])
        return value if value in node else None
    return None


def _value(obj: Obj, path: Path) -> Any:
    node: Any = obj
    for part in path:
        if part == ".":
            return node
        node = _step(node, part)
        if node is None:
            return None
    return node


def _remove(obj: Obj, path: Path) -> None:
    """Remove the field (or list element, for "." and "v:" paths) at `path`."""
    if path[-1] == ".":
        path = path[:-1]
    parent: Any = obj
    for part in path[:-1]:
        parent = _step(parent, part)
        if parent is None:
            return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith(("k:", "v:")) and isinstance(parent, list):
        found = _step(parent, last)
        if found is not None:
            parent.remove(found)


def _entries(obj: Obj) -> list[Obj]:
    return list(obj.get("metadata", {}).get("managedFields", []))


def _entry(manager: str, operation: str, api_version: str, paths: set[Path], now: str) -> Obj:
    return {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
            "fieldsType": "FieldsV1", "fieldsV1": _to_fields_v1(paths)}


def _renewed(previous: Obj | None, fresh: Obj) -> Obj:
    """`fresh`, or `previous` when it names the same fields: an unchanged ownership keeps
    its time, so that a repeated write stays a no-op."""
    if previous is not None and previous.get("fieldsV1") == fresh["fieldsV1"]:
        return previous
    return fresh


def _set_entries(obj: Obj, entries: list[Obj]) -> None:
    kept = [e for e in entries if e.get("fieldsV1")]
    obj.setdefault("metadata", {})["managedFields"] = kept


def _dotted(path: Path) -> str:
    return "".join(f".{p[2:]}" if p.startswith("f:") else f"[{p[2:]}]" for p in path if p != ".")


def _conflict_message(conflicts: list[tuple[str, Path]]) -> str:
    """Worded as upstream's (structured-merge-diff's Conflicts plus the apiserver's prefix)."""
    count = len(conflicts)
    head = f"Apply failed with {count} conflict{'s' if count > 1 else ''}: "
    if count == 1:
        manager, path = conflicts[0]
        return head + f'conflict with "{manager}": {_dotted(path)}'
    by_manager: dict[str, list[Path]] = {}
    for manager, path in conflicts:
        by_manager.setdefault(manager, []).append(path)
    if len(by_manager) == 1:
        manager, paths = next(iter(by_manager.items()))
        return head + f'conflicts with "{manager}":' + "".join(f"\n- {_dotted(p)}" for p in paths)
    return head + "conflicts with" + "".join(f'\n"{m}":' + "".join(f"\n- {_dotted(p)}" for p in paths)
                                             for m, paths in by_manager.items())


def apply(live: Obj | None, config: Obj, manager: str, *, force: bool, now: str) -> Obj:
    """The object after manager's apply of `config` to `live` (None: it does not exist)."""
    if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
        raise errors.BadRequest("an applied configuration must be an object with apiVersion and kind")
    applied = field_paths(config)
    api_version = config["apiVersion"]
    if live is None:
        created = copy.deepcopy(config)
        _set_entries(created, [_entry(manager, "Apply", api_version, applied, now)])
        return created
    entries = copy.deepcopy(_entries(live))
    ours = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"), None)
    others = [e for e in entries if e is not ours]
    owned_by = {id(e): _from_fields_v1(e.get("fieldsV1")) for e in others}

    conflicts = []
    for entry in others:
        for path in sorted(owned_by[id(entry)] & applied):
            if path[-1] != "." and _value(live, path) != _value(config, path):
                conflicts.append((entry.get("manager", ""), path))
    if conflicts and not force:
        raise errors.Conflict(_conflict_message(conflicts), metadata={"name": live.get("metadata", {}).get("name", "")})
    if force:  # the applier takes over what it overwrites
        for entry in others:
            owned_by[id(entry)] -= applied
            entry["fieldsV1"] = _to_fields_v1(owned_by[id(entry)])

    result = copy.deepcopy(live)
    previously = _from_fields_v1(ours.get("fieldsV1")) if ours else set()
    still_owned = set().union(*owned_by.values()) if owned_by else set()
    for path in sorted(previously - applied - still_owned, key=len, reverse=True):
        _remove(result, path)
    result = strategic_merge_patch(result, config)
    _set_entries(result, [*others, _renewed(ours, _entry(manager, "Apply", api_version, applied, now))])
    return result


def record_update(old: Obj | None, new: Obj, manager: str, now: str) -> None:
    """Make `manager` own what this (non-apply) write set or changed in `new`, taking it
    from the other managers (upstream's Update operation)."""
    if not manager:
        return
    changed = {p for p in field_paths(new) if old is None or _value(old, p) != _value(new, p)}
    if not changed:
        return
    entries = copy.deepcopy(_entries(old or new))
    for entry in entries:
        owned = _from_fields_v1(entry.get("fieldsV1")) - changed
        entry["fieldsV1"] = _to_fields_v1(owned)
    mine = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Update"), None)
    owned = (_from_fields_v1(mine.get("fieldsV1")) if mine else set()) | changed
    rest = [e for e in entries if e is not mine]
    _set_entries(new, [*rest, _renewed(mine, _entry(manager, "Update", new.get("apiVersion", "v1"), owned, now))])
