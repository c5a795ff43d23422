"""bench.soak's verdict arithmetic: a least-squares slope per hour and its 95 % bound."""

from __future__ import annotations

import math

from bench.soak import fit, t_975


def test_a_straight_line_is_found_exactly_and_noise_widens_the_bound() -> None:
    exact = fit([(t, 100 + 2 * t / 3600) for t in range(0, 3600, 60)])  # 2 per hour, no noise
    assert math.isclose(exact["slope_per_hour"], 2.0, abs_tol=1e-3) and exact["bound_95"] < 1e-3
    noisy = fit([(t, 100 + (5 if i % 2 else -5)) for i, t in enumerate(range(0, 3600, 60))])  # flat, noisy
    assert abs(noisy["slope_per_hour"]) < noisy["bound_95"]  # flat within noise
    assert fit([(0, 1), (60, 2)])["bound_95"] == math.inf  # two points say nothing


def test_student_t() -> None:
    assert t_975(1) == 12.706 and t_975(30) == 2.042 and 1.96 < t_975(200) < 1.98
