"""CrashLoopBackOff's clock."""

from __future__ import annotations

from kubelet.backoff import Backoff


def test_doubles_to_the_maximum_and_resets_after_a_long_run() -> None:
    now = [1000.0]
    backoff = Backoff(10, 300, clock=lambda: now[0])
    assert backoff.remaining("c", since=now[0]) == 0  # the first restart is immediate
    assert [backoff.next("c", now[0]) for _ in range(7)] == [10, 20, 40, 80, 160, 300, 300]
    assert backoff.remaining("c", since=now[0] - 100) == 200
    now[0] += 601  # longer than twice the maximum since the last restart
    assert backoff.remaining("c", since=now[0]) == 0
    assert backoff.next("c", now[0]) == 10
    backoff.forget("c")
    assert backoff.delay("c") == 0


def test_left_counts_from_the_last_restart() -> None:
    now = [50.0]
    backoff = Backoff(10, 300, clock=lambda: now[0])
    assert backoff.left("s") == 0
    backoff.next("s")
    now[0] += 4
    assert backoff.left("s") == 6
    now[0] += 7
    assert backoff.left("s") == 0
