""":func:`~nsightx._results.stats.mean_intervals` of a few rows of ordinary numbers, over Python floats, is the
numpy path's.

Up to ``_PLAIN_ROWS`` rows whose summaries are all ordinary (float64, at least five values, a positive minimum,
finite sums) the ends are computed over Python floats (numpy's power and exponentials kept); the ends must be the
numpy path's bit for bit, and any row that is not ordinary sends every row to the numpy path.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results import stats

_EDGES = [0.0, -0.0, -1.0, 5e-324, 1e-300, sys.float_info.max, 1e300, np.inf, -np.inf, np.nan]
_NUMBER = st.one_of(st.floats(1e-3, 1e3), st.sampled_from(_EDGES), st.floats(allow_nan=True, allow_infinity=True))


def _both(*summaries: np.ndarray) -> tuple[list[str], list[str]]:
    """The ends of both paths, as hex of their bytes (NaN signs and payloads compared too)."""
    with np.errstate(all="ignore"):
        few = stats.mean_intervals(*summaries)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(stats, "_PLAIN_ROWS", -1)
            numpy = stats.mean_intervals(*summaries)
    return [a.tobytes().hex() for a in few], [a.tobytes().hex() for a in numpy]


def _summaries(samples: list[list[float]]) -> tuple[np.ndarray, ...]:
    """Per sample: mean, standard deviation, count, minimum and the moments of the logs (as the frame has them)."""
    values = np.array([v for s in samples for v in s], dtype=np.float64)
    ids = np.repeat(np.arange(len(samples)), [len(s) for s in samples])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a sample of one value has no standard deviation
        mean = np.array([np.mean(s) for s in samples])
        std = np.array([np.std(s, ddof=1) for s in samples])
        minimum, log_mean, log_var = stats.log_moments(values, ids, len(samples))
    return mean, std, np.array([len(s) for s in samples]), minimum, log_mean, log_var


_SAMPLE = st.lists(
    st.one_of(st.floats(1e-9, 1e9), st.floats(0.5, 2.0), st.floats(0.5, 2.0), st.sampled_from(_EDGES)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(samples=st.lists(st.one_of(_SAMPLE, _SAMPLE.filter(lambda s: len(s) >= 5)), min_size=1, max_size=6))
def test_samples_get_the_numpy_paths_ends(samples: list[list[float]]) -> None:
    few, numpy = _both(*_summaries(samples))
    assert few == numpy


_POSITIVE = st.one_of(st.floats(1e-9, 1e9), st.floats(0.9, 1.1), st.sampled_from([5e-324, 1e-300, 1e300, 1.0]))


@settings(max_examples=300, deadline=None)
@given(samples=st.lists(st.lists(_POSITIVE, min_size=5, max_size=12), min_size=1, max_size=6))
def test_positive_samples_get_the_numpy_paths_ends(samples: list[list[float]]) -> None:
    """Positive samples of five values or more: mostly the Python floats' path, extremes included."""
    few, numpy = _both(*_summaries(samples))
    assert few == numpy


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(*[_NUMBER] * 5, st.integers(0, 12)), min_size=1, max_size=8))
def test_any_summaries_get_the_numpy_paths_ends(rows: list[tuple[float, ...]]) -> None:
    mean, std, minimum, log_mean, log_var = (np.array([r[i] for r in rows], dtype=np.float64) for i in range(5))
    few, numpy = _both(mean, std, np.array([r[5] for r in rows]), minimum, log_mean, log_var)
    assert few == numpy


def test_timings_of_a_sweep_take_the_python_floats() -> None:
    """A sweep's timings (positive, 11 runs a config) are ordinary: no numpy path, the same ends."""
    rng = np.random.default_rng(35)
    summaries = _summaries([list(rng.lognormal(np.log(t), 0.05, 11)) for t in (0.1, 0.4, 1.6, 6.4)])
    plain = stats._plain_intervals(*summaries, 0.95)
    assert plain is not None
    assert [a.tobytes() for a in plain] == [a.tobytes() for a in stats.mean_intervals(*summaries)]
    few, numpy = _both(*summaries)
    assert few == numpy


@pytest.mark.parametrize(
    "change",
    [
        {"n": 4},  # too few runs for the joined interval
        {"minimum": 0.0},
        {"minimum": -1.0},
        {"std": 0.0},  # a zero half-width
        {"std": np.inf},
        {"log_var": np.nan},
        {"mean": np.inf},
    ],
)
def test_one_row_out_of_the_ordinary_sends_all_to_numpy(change: dict[str, float]) -> None:
    rng = np.random.default_rng(1)
    summaries = dict(
        zip(
            ["mean", "std", "n", "minimum", "log_mean", "log_var"],
            _summaries([list(rng.lognormal(0.0, 0.1, 6)) for _ in range(3)]),
            strict=True,
        )
    )
    for name, value in change.items():
        summaries[name][1] = value
    assert stats._plain_intervals(*summaries.values(), 0.95) is None
    few, numpy = _both(*summaries.values())
    assert few == numpy
