"""CronJob schedules (kubeling/cron.py): robfig/cron's five fields, macros and @every;
time zones; the errors worded as upstream's; and the missed-runs arithmetic of the
CronJob controller (most_recent)."""

from __future__ import annotations

import datetime as dt

import pytest

from controllers.cronjob import job_name, most_recent
from kubeling import cron
from protos.kubeling.v1 import batch_pb2, meta_pb2

UTC = dt.timezone.utc


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(("spec", "after", "expected"), [
    ("*/5 * * * *", at(2026, 1, 1, 0, 3), at(2026, 1, 1, 0, 5)),
    ("@hourly", at(2026, 1, 1, 0, 3), at(2026, 1, 1, 1)),
    ("@daily", at(2026, 1, 1, 0, 3), at(2026, 1, 2)),
    ("0 0 * * THU", at(2026, 1, 1), at(2026, 1, 8)),  # 2026-01-01 is a Thursday
    ("0 0 13 * FRI", at(2026, 2, 1), at(2026, 2, 6)),  # day of month OR day of week, as cron
    ("@every 90s", at(2026, 1, 1, 0, 0, 10), at(2026, 1, 1, 0, 1, 40)),
])
def test_next_activation(spec: str, after: dt.datetime, expected: dt.datetime) -> None:
    assert cron.parse(spec).next_after(after) == expected


@pytest.mark.parametrize(("spec", "message"), [
    ("* * * *", "expected exactly 5 fields, found 4: * * * *"),
    ("* * * * * *", "expected exactly 5 fields, found 6"),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("H * * * *", "failed to parse int from H"),
    ("61 * * * *", "out of range"),
    ("@every soon", 'invalid duration "soon"'),
    ("", "empty spec string"),
])
def test_bad_schedules(spec: str, message: str) -> None:
    with pytest.raises(cron.CronError) as err:
        cron.parse(spec)
    assert message in str(err.value)


def test_time_zones() -> None:
    berlin = cron.parse("0 9 * * *", cron.zone("Europe/Berlin"))
    assert berlin.next_after(at(2026, 7, 1)) == at(2026, 7, 1, 7)  # 09:00 CEST
    assert berlin.next_after(at(2026, 1, 1)) == at(2026, 1, 1, 8)  # 09:00 CET
    for name in ("Mars/Olympus_Mons", "../etc/passwd", "/etc/localtime"):
        with pytest.raises(cron.CronError, match=f"unknown time zone {name}"):
            cron.zone(name)


def test_most_recent_and_the_missed_count() -> None:
    schedule = cron.parse("*/10 * * * *")
    assert most_recent(schedule, at(2026, 1, 1, 0, 5), at(2026, 1, 1, 0, 9)) == (None, 0)
    assert most_recent(schedule, at(2026, 1, 1, 0, 5), at(2026, 1, 1, 0, 35)) == (at(2026, 1, 1, 0, 30), 3)
    latest, missed = most_recent(schedule, at(2026, 1, 1), at(2026, 1, 3, 5, 17))
    assert latest == at(2026, 1, 3, 5, 10) and missed > 100  # found backwards, not walked


def test_job_names_count_minutes_since_the_epoch() -> None:
    cj = batch_pb2.CronJob(metadata=meta_pb2.ObjectMeta(name="hello"))
    assert job_name(cj, at(2026, 1, 1, 0, 1)) == f"hello-{int(at(2026, 1, 1, 0, 1).timestamp()) // 60}"
