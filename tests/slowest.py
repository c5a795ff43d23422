"""The slowest tests of a `make test`, across its runs: `python -m tests.slowest FILE [N]`
reads the durations tests/conftest.py recorded (KUBELING_DURATIONS) and prints the N
slowest phases (20 by default), with the total time the tests took."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    path, count = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 20
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    records.sort(key=lambda r: -r["seconds"])
    print(f"slowest {min(count, len(records))} of {len(records)} test phases "
          f"({sum(r['seconds'] for r in records):.0f}s in all):")
    for r in records[:count]:
        print(f"{r['seconds']:8.2f}s {r['when']:<8} {r['test']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
