"""Sets of Job completion indexes in their text form, "1,3-5,7" (a Job's
status.completedIndexes and failedIndexes, a successPolicy's succeededIndexes), as
upstream's pkg/controller/job indexed_job_utils."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["parse_indexes", "format_indexes"]


def parse_indexes(text: str, limit: int | None = None) -> set[int]:
    """ "1,3-5" → {1, 3, 4, 5}; ValueError for anything else (upstream's parseIndexesFromString
    skips what it cannot read; validation refuses it before the controller sees it)."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        lo, hi = int(first), int(last) if last else int(first)
        if lo < 0 or hi < lo:
            raise ValueError(part)
        if limit is not None and hi >= limit:
            raise ValueError(part)
        out.update(range(lo, hi + 1))
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    """{1, 3, 4, 5} → "1,3-5" (runs of consecutive indexes as ranges)."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
