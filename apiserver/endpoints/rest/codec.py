"""Kubernetes JSON for the project's protobuf messages, both ways: `kubeling.kjson`
(shared with the scheduler's HTTP extenders and the registries that keep objects as JSON),
under the name the REST front end imports it by."""

from __future__ import annotations

from kubeling.kjson import Decoded, canonical_json, format_time, from_json, parse_time, to_json

__all__ = ["to_json", "from_json", "canonical_json", "Decoded", "format_time", "parse_time"]
