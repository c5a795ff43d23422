"""Timestamps as the API stores them (metav1.Time: whole seconds), shared by the
apiserver's strategies and the controllers."""

from __future__ import annotations

import time

from google.protobuf.timestamp_pb2 import Timestamp

__all__ = ["now"]


def now() -> Timestamp:
    """The current time at second precision, as metav1.Time serializes it."""
    return Timestamp(seconds=int(time.time()))
