"""The kubelet's token refresh rule (kubelet/volumes.py, as upstream's token manager):
a token is asked again once 80% of its lifetime has passed, or when older than 24 h."""

from __future__ import annotations

from kubelet.volumes import _Token


def test_a_token_is_refreshed_at_80_percent_of_its_life_or_after_a_day() -> None:
    hour = _Token("t", issued=1000.0, expires=1000.0 + 3607)
    assert not hour.stale(1000.0)
    assert not hour.stale(1000.0 + 0.79 * 3607)
    assert hour.stale(1000.0 + 0.8 * 3607)
    year = _Token("t", issued=0.0, expires=365 * 86400.0)
    assert not year.stale(86400.0 - 1)
    assert year.stale(86400.0 + 1)  # a long-lived token is still replaced daily
