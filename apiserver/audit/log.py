"""The audit log backend (upstream's log backend with lumberjack's rotation): one JSON
event per line; past `--audit-log-maxsize` megabytes the file is moved aside as
`<name>-<UTC time to the microsecond>.<ext>` and a new one begun, keeping at most `--audit-log-maxbackup`
old files, none older than `--audit-log-maxage` days (0: no limit). `-` writes to
standard output."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["AuditLog"]

_MB = 1024 * 1024


class AuditLog:
    def __init__(self, path: str, max_size_mb: int = 0, max_backups: int = 0, max_age_days: int = 0) -> None:
        self.path = path
        self.max_bytes = max_size_mb * _MB
        self.max_backups = max_backups
        self.max_age_days = max_age_days
        self._file: IO[str] | None = None
        self._size = 0

    def _open(self) -> IO[str]:
        if self._file is None:
            if self.path == "-":
                self._file = sys.stdout
            else:
                target = Path(self.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                self._file = target.open("a", encoding="utf-8")
                target.chmod(0o600)  # what it holds may be sensitive: the apiserver's own
                self._size = target.stat().st_size
        return self._file

    def write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":")) + "\n"
        out = self._open()
        if self.path != "-" and self.max_bytes and self._size + len(line) > self.max_bytes and self._size:
            self._rotate()
            out = self._open()
        out.write(line)
        out.flush()
        self._size += len(line)

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self._file = None
        current = Path(self.path)
        when = dt.datetime.now(dt.timezone.utc)
        while True:  # names sort as the files were made, none replacing another
            backup = current.with_name(f"{current.stem}-{when.strftime('%Y-%m-%dT%H-%M-%S.%f')}{current.suffix}")
            if not backup.exists():
                break
            when += dt.timedelta(microseconds=1)
        current.rename(backup)
        backups = sorted(current.parent.glob(f"{current.stem}-*{current.suffix}"))
        keep = backups[-self.max_backups:] if self.max_backups else backups
        cutoff = time.time() - self.max_age_days * 86400
        for old in backups:
            if old not in keep or (self.max_age_days and old.stat().st_mtime < cutoff):
                old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None and self._file is not sys.stdout:
            self._file.close()
        self._file = None
