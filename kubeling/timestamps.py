"""Timestamps as the API stores them (metav1.Time: whole seconds), shared by the
apiserver's strategies and the controllers."""

from __future__ import annotations

import calendar
import time

from google.protobuf.timestamp_pb2 import Timestamp

__all__ = ["now", "human_duration", "rfc3339", "parse_rfc3339"]


def now() -> Timestamp:
    """The current time at second precision, as metav1.Time serializes it."""
    return Timestamp(seconds=int(time.time()))


def rfc3339(seconds: float) -> str:
    """A time as the API writes it in JSON (metav1.Time: whole seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def parse_rfc3339(text: str) -> float:
    """Seconds since the epoch of such a time (`Z` or `+00:00`); ValueError when it is none."""
    return float(calendar.timegm(time.strptime(text.replace("+00:00", "Z"), "%Y-%m-%dT%H:%M:%SZ")))


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"
