"""How every benchmark reports: JSON printed, and written to --json when given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["report"]


def report(result: dict[str, Any], path: str = "") -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
