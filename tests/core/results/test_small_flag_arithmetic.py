"""The flags' small-result arithmetic in Python gives numpy's verdicts (issue 35).

For up to :data:`~nsightx._results.store.SMALL` groups, ``short`` and ``unstable`` (and the groups left to the
Python rule) are computed one group at a time over Python floats, and ``clock_varied`` over Python lists of each
group's own rows. These tests run the numpy path on the same numbers (the arrays repeated past ``SMALL``, or
``SMALL`` lowered) and ask for the same verdicts, on edge values and on every committed result.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import nsightx
from nsightx._results import table_flags
from nsightx._results.dataframe import aggregate
from nsightx._results.store import SMALL
from nsightx._results.table_flags import Spread

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESULTS = sorted(
    [
        *FIXTURES.glob("frames/*.result.json"),
        *FIXTURES.glob("results/*/result.json"),
        *FIXTURES.glob("gpu-results/*.parquet"),
    ]
)
EDGES = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-320, 2.0**-401, 1e300, 2.0**500, 4999.9, 5000.0, 5e3 + 1e-9]


def _spreads() -> tuple[Spread, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Groups over every combination of edge means, counts and interval ends (and a few ordinary ones)."""
    rng = np.random.default_rng(35)
    means = [*EDGES, *rng.normal(1000.0, 500.0, 20)]
    rows = [(n, m, e) for n in (0, 1, 2, 11) for m in means for e in (0.0, 0.02, 0.0200000001, 1.0, math.nan)]
    n = np.array([r[0] for r in rows], dtype=np.int64)
    mean = np.array([r[1] for r in rows])
    with np.errstate(invalid="ignore", over="ignore"):
        reach = np.abs(mean) * np.array([r[2] for r in rows]) / 100.0 * 2.0
    with np.errstate(invalid="ignore"):
        lower, upper = mean - reach, mean + reach * 0.5
    upper[::7] = math.nan
    mean_abs = np.abs(mean)
    mean_abs[::5] = math.nan
    std = np.full(len(rows), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = Spread(n, mean, mean_abs, std, mean, np.log(np.abs(mean) + 1.0), std)
    unit_ns = np.arange(len(rows)) % 3 != 0
    return spread, unit_ns, (lower, upper)


def _numpy_verdicts(spread: Spread, unit_ns: np.ndarray, interval: object) -> list[np.ndarray]:
    """:func:`_short_and_unstable` of the arrays repeated past ``SMALL``, cut back to their length (numpy's path)."""
    k = len(spread.n)
    times = SMALL // k + 2

    def tiled(a: np.ndarray) -> np.ndarray:
        return np.tile(a, times)

    big = Spread(*(tiled(getattr(spread, f)) for f in Spread.__dataclass_fields__))
    wide = None if interval is None else tuple(tiled(a) for a in interval)  # type: ignore[attr-defined]
    return [v[:k] for v in table_flags._short_and_unstable(big, tiled(unit_ns), wide)]  # type: ignore[arg-type]


@pytest.mark.parametrize("given_interval", [True, False])
def test_small_short_and_unstable_are_numpy_verdicts(given_interval: bool) -> None:
    spread, unit_ns, interval = _spreads()
    for start in range(0, len(spread.n), SMALL // 2):  # each slice at most SMALL groups: the small path
        part = Spread(*(getattr(spread, f)[start : start + SMALL // 2] for f in Spread.__dataclass_fields__))
        cut = tuple(a[start : start + SMALL // 2] for a in interval) if given_interval else None
        units = unit_ns[start : start + SMALL // 2]
        small = table_flags._short_and_unstable(part, units, cut)  # type: ignore[arg-type]
        expected = _numpy_verdicts(part, units, cut)
        for got, want in zip(small, expected, strict=True):
            assert got.dtype == np.bool_
            assert got.tolist() == want.tolist()


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.parent.name + "/" + p.name)
def test_small_flags_are_numpy_flags_on_committed_results(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = nsightx.load(path).data
    small = aggregate(data)["Flags"].tolist()
    monkeypatch.setattr(table_flags, "SMALL", -1)  # every stage of the flags on its numpy path
    assert aggregate(data)["Flags"].tolist() == small
