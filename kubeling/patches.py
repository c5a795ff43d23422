"""The three patch formats of the Kubernetes API, on Kubernetes JSON (dicts):
JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

The strategic merge patch knows the list merge keys of the core types this server has
(containers by name, ports by containerPort, conditions by type, ...) as their Go struct
tags declare them (`patchStrategy:"merge" patchMergeKey:"name"`), and honours the
directives kubectl sends: `$patch` (replace, delete, merge), `$retainKeys`,
`$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`. Lists without a merge
key are replaced whole, as upstream does.
"""

from __future__ import annotations

import copy
from typing import Any

from kubeling import errors

__all__ = ["merge_patch", "json_patch", "strategic_merge_patch", "MERGE_KEYS", "merge_key", "FIELD_MERGE_KEYS"]

# field name -> merge key, for lists merged element by element (upstream's struct tags).
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "env": "name", "ports": "containerPort", "volumeMounts": "mountPath", "conditions": "type",
    "podIPs": "ip", "hostIPs": "ip", "addresses": "type", "taints": "key", "ownerReferences": "uid",
    "imagePullSecrets": "name", "schedulingGates": "name", "topologySpreadConstraints": "topologyKey",
    "readinessGates": "conditionType",
}
# Where a field name means different lists (upstream's struct tags differ): by message field.
# None: atomic (replaced whole), as upstream's EndpointSlice and Endpoints lists.
FIELD_MERGE_KEYS: dict[str, str | None] = {
    "kubeling.v1.ServiceSpec.ports": "port",
    "kubeling.v1.EndpointSlice.ports": None, "kubeling.v1.EndpointSubset.ports": None,
    "kubeling.v1.EndpointSubset.addresses": None, "kubeling.v1.EndpointSubset.notReadyAddresses": None,
}


def merge_key(key: str, path: str) -> str | None:
    """The merge key of the list `key` at dotted `path` of a patched object: a Service's
    `spec.ports` by port, containers' ports by containerPort, other `ports` atomic."""
    if key == "ports":
        if path == "spec.ports":
            return "port"
        return "containerPort" if "ontainers" in path.rpartition(".")[0] else None
    return MERGE_KEYS.get(key)


# Lists of scalars merged as sets (patchStrategy:"merge" on []string): by dotted path.
_MERGED_SCALAR_LISTS = {"metadata.finalizers"}


def _bad(message: str) -> errors.BadRequest:
    return errors.BadRequest(f"the patch could not be applied: {message}")


# ------------------------------------------------------------------ RFC 7386


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# ------------------------------------------------------------------ RFC 6902


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _bad(f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _bad(f'path "{path}" does not exist')
    return node


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    return _walk(doc, parts[:-1], path), parts[-1]


def _get(doc: Any, path: str) -> Any:
    return _walk(doc, _pointer(path), path)


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise _bad("cannot remove the whole document")
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _bad(f'path "{path}" does not exist')


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _bad(f'path "{path}" does not exist')
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise _bad(f'index "{last}" out of range in "{path}"')
    else:
        raise _bad(f'path "{path}" does not exist')
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise errors.BadRequest("a JSON patch must be an array of operations")
    doc = copy.deepcopy(doc)
    for i, op in enumerate(operations):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise _bad(f"operation {i}: needs string fields op and path")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _bad(f'operation {i} ({kind}): missing "value"')
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise _bad(f'operation {i} ({kind}): missing "from"')
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise errors.Invalid(f'the test of operation {i} failed: "{path}" differs')
        else:
            raise _bad(f'operation {i}: unknown op "{kind}"')
    return doc


# ------------------------------------------------------------------ strategic merge


def strategic_merge_patch(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise errors.BadRequest("a strategic merge patch must be a JSON object")
    return _merge_map(copy.deepcopy(original) if isinstance(original, dict) else {}, patch, "")


def _strip(value: Any) -> Any:
    """A patch value set as is (no original to merge into): without directives."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    return value


def _merge_map(original: dict[str, Any], patch: dict[str, Any], path: str) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip(patch)
    if directive not in (None, "merge", "delete"):
        raise _bad(f'unknown $patch directive "{directive}" at {path or "the top"}')
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(original.get(name), list) and isinstance(value, list):
                original[name] = [v for v in original[name] if v not in value]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = f"{path}.{key}" if path else key
        if value is None:
            original.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                original.pop(key, None)
            elif isinstance(original.get(key), dict):
                original[key] = _merge_map(original[key], value, sub)
            else:
                original[key] = _strip(value)
        elif isinstance(value, list):
            original[key] = _merge_list(original.get(key), value, key, sub)
            order = patch.get(f"$setElementOrder/{key}")
            if isinstance(order, list):
                original[key] = _reorder(original[key], order, merge_key(key, sub))
        else:
            original[key] = value
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        original = {k: v for k, v in original.items() if k in retain}
    return original


def _merge_list(original: Any, patch: list[Any], key: str, path: str) -> list[Any]:
    if not isinstance(original, list):
        original = []
    by = merge_key(key, path)
    if by is not None and all(isinstance(v, dict) for v in patch):
        if any(v.get("$patch") == "replace" for v in patch):
            return [_strip(v) for v in patch if v.get("$patch") != "replace"]
        out = list(original)
        for item in patch:
            if by not in item:
                raise _bad(f"{path}: an element has no merge key {by!r}")
            index = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(by) == item[by]), None)
            if item.get("$patch") == "delete":
                if index is not None:
                    out.pop(index)
            elif index is not None:
                out[index] = _merge_map(out[index], item, f"{path}[{by}={item[by]}]")
            else:
                out.append(_strip(item))
        return out
    if path in _MERGED_SCALAR_LISTS:
        return list(original) + [v for v in patch if v not in original]
    return _strip(patch)


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def ident(v: Any) -> Any:
        return v.get(merge_key) if merge_key and isinstance(v, dict) else v

    wanted = [ident(v) for v in order]
    rank = {repr(w): i for i, w in enumerate(wanted)}
    return sorted(items, key=lambda v: rank.get(repr(ident(v)), len(wanted)))
