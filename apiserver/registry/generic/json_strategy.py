"""Built-in resources kept as JSON (CustomResource messages), as upstream keeps its
aggregator's APIServices: the object's shape is an OpenAPI schema (its fields, types and
defaults), so decoding prunes what the schema does not know (refused under
fieldValidation=Strict, a warning otherwise), defaults fill what is absent, and a wrong
type is a field error before the kind's own rules run. A subclass gives `schema` and
`validate_content`; status, when the kind has it, is written through its subresource only.
"""

from __future__ import annotations

from typing import Any, ClassVar

from apiserver.registry.apiextensions import schema as schemas
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling.dynamic import content_of, set_content
from protos.kubeling.v1 import custom_pb2

__all__ = ["JsonStrategy", "string", "integer", "boolean", "array", "obj", "string_map", "LABEL_SELECTOR",
           "CONDITIONS"]

CR = custom_pb2.CustomResource
Schema = dict[str, Any]


def string(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def integer(**extra: Any) -> Schema:
    return {"type": "integer", **extra}


def boolean(**extra: Any) -> Schema:
    return {"type": "boolean", **extra}


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def obj(properties: dict[str, Schema], **extra: Any) -> Schema:
    return {"type": "object", "properties": properties, **extra}


def string_map(**extra: Any) -> Schema:
    return {"type": "object", "additionalProperties": {"type": "string"}, **extra}


LABEL_SELECTOR = obj({"matchLabels": string_map(),
                      "matchExpressions": array(obj({"key": string(), "operator": string(),
                                                     "values": array(string())}))})
CONDITIONS = array(obj({"type": string(), "status": string(), "observedGeneration": integer(),
                        "lastTransitionTime": string(), "reason": string(), "message": string()}))


class JsonStrategy(Strategy[CR]):
    # The kind's fields below the top level (spec, status, webhooks, ...): an OpenAPI schema.
    schema: ClassVar[Schema]

    def _schema(self) -> Schema:
        return obj(self.schema)

    def openapi_schema(self) -> Schema:
        """The kind's schema below apiVersion, kind and metadata (what type checks read)."""
        return self._schema()

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        """The kind's own rules, on content whose types the schema accepted."""

    def validate_content_update(self, content: dict[str, Any], before: dict[str, Any], check: Checker) -> None:
        """The kind's rules for updates (immutable fields)."""

    # ---- decoding ----
    def unknown_fields(self, obj: CR) -> list[str]:
        return schemas.prune(self._schema(), content_of(obj), "")

    def _pruned_and_defaulted(self, obj: CR) -> None:
        content = content_of(obj)
        schemas.prune(self._schema(), content, "")
        schemas.apply_defaults(self._schema(), content)
        self.set_defaults(content)
        set_content(obj, content)

    def set_defaults(self, content: dict[str, Any]) -> None:
        """Defaults the schema cannot say (those of items of lists whose parent is absent...)."""

    # ---- create / update ----
    def prepare_for_create(self, obj: CR) -> None:
        obj.apiVersion, obj.kind = self.resource.api_version, self.resource.kind
        if self.has_status:
            content = content_of(obj)
            content.pop("status", None)
            set_content(obj, content)

    def default(self, obj: CR) -> None:
        self._pruned_and_defaulted(obj)

    def _judge(self, obj: CR, check: Checker) -> dict[str, Any] | None:
        content = content_of(obj)
        found = schemas.validate_value(self._schema(), content, "")
        check.violations.extend(found)
        return None if found else content

    def validate(self, obj: CR, check: Checker) -> None:
        content = self._judge(obj, check)
        if content is not None:
            self.validate_content(content, check)

    def validate_update(self, new: CR, old: CR, check: Checker) -> None:
        if not check.violations:
            self.validate_content_update(content_of(new), content_of(old), check)

    def prepare_for_update(self, new: CR, old: CR) -> None:
        new.apiVersion, new.kind = self.resource.api_version, self.resource.kind
        if self.has_status:
            content, before = content_of(new), content_of(old)
            content.pop("status", None)
            if "status" in before:
                content["status"] = before["status"]
            set_content(new, content)

    def prepare_for_status_update(self, new: CR, old: CR) -> None:
        status = content_of(new).get("status")
        new.CopyFrom(old)
        content = content_of(old)
        content["status"] = status if isinstance(status, dict) else {}
        set_content(new, content)
        self._pruned_and_defaulted(new)

    def validate_status(self, new: CR, check: Checker) -> None:
        self._judge(new, check)

    def spec_changed(self, new: CR, old: CR) -> bool:
        content, before = content_of(new), content_of(old)
        content.pop("status", None)
        before.pop("status", None)
        return content != before
