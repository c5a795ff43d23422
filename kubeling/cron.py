"""CronJob schedules: standard cron syntax (five fields), the `@hourly`-style macros and
`@every <duration>`, as upstream's robfig/cron ParseStandard reads them, evaluated in a
time zone. croniter does the calendar arithmetic; this module keeps to the five fields
upstream takes (croniter would also take seconds, years and Jenkins' H) and words the
errors as upstream's."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass

from croniter import CroniterError, croniter

__all__ = ["Schedule", "CronError", "parse", "zone"]

_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Schedule:
    spec: str
    tz: dt.tzinfo
    every: float = 0.0  # @every: seconds between activations (robfig's ConstantDelaySchedule)

    def next_after(self, when: dt.datetime) -> dt.datetime:
        """The first activation strictly after `when`."""
        if self.every:
            return when.replace(microsecond=0) + dt.timedelta(seconds=self.every)
        value: dt.datetime = croniter(self.spec, when.astimezone(self.tz)).get_next(dt.datetime)
        return value

    def last_until(self, after: dt.datetime, until: dt.datetime) -> dt.datetime | None:
        """The latest activation in (after, until], found backwards from `until`."""
        if self.every:
            steps = int((until - after).total_seconds() // self.every)
            t = after.replace(microsecond=0) + dt.timedelta(seconds=self.every * steps)
            t = t if t > after else t + dt.timedelta(seconds=self.every)
        else:
            it = croniter(self.spec, (until + dt.timedelta(seconds=1)).astimezone(self.tz))
            t = it.get_prev(dt.datetime)
        return t if after < t <= until else None

    def times(self, after: dt.datetime, until: dt.datetime) -> Iterator[dt.datetime]:
        """The activations in (after, until], in order."""
        t = after
        while True:
            t = self.next_after(t)
            if t > until:
                return
            yield t


def zone(name: str | None) -> dt.tzinfo:
    """A CronJob's timeZone (an IANA name); unset is the controller manager's local zone."""
    if not name:
        local = dt.datetime.now().astimezone().tzinfo
        return local or dt.timezone.utc
    if name.startswith("/") or ".." in name or " " in name:
        raise CronError(f"unknown time zone {name}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name}") from None


def parse(spec: str, tz: dt.tzinfo = dt.timezone.utc) -> Schedule:
    text = spec.strip()
    if not text:
        raise CronError("empty spec string")
    if text.startswith("@every "):
        return Schedule(text, tz, _every(text, text[len("@every "):].strip()))
    if text.startswith("@"):
        if text not in _MACROS:
            raise CronError(f"unrecognized descriptor: {text}")
    else:
        fields = text.split()
        if len(fields) != 5:
            raise CronError(f"expected exactly 5 fields, found {len(fields)}: {text}")
        for f in fields:  # croniter's Jenkins-style H (hashed) is no cron syntax (THU is a day)
            if "H" in f.upper().replace("THU", ""):
                raise CronError(f"failed to parse int from {f}: invalid syntax")
    try:
        croniter(text, dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    except (CroniterError, ValueError, KeyError) as err:
        raise CronError(str(err)) from None
    return Schedule(text, tz)


def _every(text: str, duration: str) -> float:
    """A Go duration (1h30m, 90s) as seconds; robfig rounds it up to at least a second."""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(duration):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not duration or pos != len(duration):
        raise CronError(f"failed to parse duration {text}: time: invalid duration \"{duration}\"")
    return float(max(1, round(total)))
