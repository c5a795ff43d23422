"""How every benchmark reports: JSON printed, and written to --json when given, with the
host's speed (bench.hostspeed) so that results from different hosts can be compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.hostspeed import host_speed

__all__ = ["report"]


def report(result: dict[str, Any], path: str = "") -> None:
    if "host_speed" not in result:
        result["host_speed"] = host_speed()
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
