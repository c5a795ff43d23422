"""The kubelet's log reading options: RFC 3339 times (a CRI line's, sinceTime) and `since`."""

from __future__ import annotations

import pytest

from cri.logs import format_entries, log_time, rfc3339nano


def test_log_times_and_since() -> None:
    assert log_time("2016-10-06T00:17:09.669794202Z") == pytest.approx(1475713029.669794)
    assert log_time(rfc3339nano(1_000_000_000)) == 1.0
    assert log_time("2026-12-04T06:00:00+01:00") == log_time("2026-12-04T05:00:00Z")
    with pytest.raises(ValueError):
        log_time("yesterday")
    raw = b"1970-01-01T00:00:01Z stdout F old\n1970-01-01T00:00:03.5Z stdout F new\n"
    assert format_entries(raw, False, since=2.0) == [b"new\n"]
    assert format_entries(raw, False) == [b"old\n", b"new\n"]
