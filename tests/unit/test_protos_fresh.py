"""The generated modules match the .proto files (run `make protos` when this fails)."""

from __future__ import annotations

from protos.generate import stale


def test_generated_modules_are_fresh() -> None:
    assert stale() == []
