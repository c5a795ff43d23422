"""runc's own JSON log (`--log FILE --log-format json`): where its errors go."""

from __future__ import annotations

import json
from pathlib import Path


def last_error(log_path: Path) -> str:
    """The last error or fatal message runc wrote ("" when none)."""
    message = ""
    try:
        for line in log_path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                message = line.strip() or message
                continue
            if entry.get("level") in ("error", "fatal"):
                message = str(entry.get("msg", "")) or message
    except OSError:
        pass
    return message
