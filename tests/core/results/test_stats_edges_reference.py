"""The aggregated frame's statistics at the edges of the float range, against a naive exact reference.

``test_frame_reference.py`` checks the statistics on ordinary values. Here each row's runs are drawn from one
regime at an edge: huge (1e150 .. 1.8e308, where squared deviations and sums overflow), tiny (1e-300 and
subnormals, where squares underflow), all equal, all equal but one, signed with zeros, integers past ``2**53``,
with NaN (failed) and infinite runs mixed in. The reference computes with ``fractions.Fraction`` (exact mean,
variance and median, rounded once), ``math.log`` for the logs and SciPy's t quantile, following docs/api.md
("The aggregated DataFrame", "The interval of the mean"). Tolerances and why:

- ``NumRuns``, ``MinValue``, ``MaxValue``, ``MedianValue``: exact (no arithmetic but one rounded half sum);
- ``AvgValue``: relative 1e-9, or 1e-9 of the mean size of the values (a plain sum of values of both signs
  loses what cancels: its error is a few ``n * eps`` of ``sum |v|``);
- ``StdDev`` and the interval ends: relative 1e-9, or 1e-9 of the largest size (a spread of nearly equal values
  is known to the rounding of their size), and a few subnormal steps (``4 * 5e-324``: a spread of subnormal
  values has one to three digits in any arithmetic); ``RelativeStdDevPct`` the same, divided by the mean;
- an end past the float range is ``inf`` (the docs are silent there; it is the float the end rounds to).

The docs are silent on a spread whose exact value lies past the float range (values of both signs near
1.8e308): those rows' spread and interval are not checked.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from fractions import Fraction
from typing import Any

import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frame_reference import TIME, Shape, build, per_run_values  # the sibling module (pytest's rootdir path)

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "60"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=600``)."""
MAX = sys.float_info.max
SUB = 4 * 5e-324
"""A few subnormal steps: the precision a spread of subnormal values has."""


def _mantissa(draw: Any) -> float:
    return draw(st.floats(1.0, 9.999, allow_nan=False))


@st.composite
def regime_values(draw: Any, n: int) -> list[float]:
    """``n`` runs of one edge regime."""
    regime = draw(st.sampled_from(["huge", "tiny", "subnormal", "equal", "ties", "signed", "bigint", "ordinary"]))
    if regime == "huge":
        top = draw(st.integers(150, 307))
        out = [_mantissa(draw) * 10.0 ** draw(st.integers(top - 3, top)) for _ in range(n)]
        if draw(st.booleans()):
            out = [min(v * 17.0, MAX) for v in out]  # up to the largest float
    elif regime == "tiny":
        out = [_mantissa(draw) * 10.0 ** draw(st.integers(-307, -290)) for _ in range(n)]
    elif regime == "subnormal":
        out = [draw(st.integers(1, 2**20)) * 5e-324 for _ in range(n)]
    elif regime == "equal":
        out = [draw(st.sampled_from([1e-300, 3.0, 0.1, 1e300, 5e-324, 0.0, -7.5, 1.7e308]))] * n
    elif regime == "ties":
        same = draw(st.sampled_from([1e-300, 3.0, 7.0, 1e300, 0.0, 1.7e308]))
        other = draw(st.sampled_from([math.nextafter(same, math.inf), math.nextafter(same, -math.inf), same * 2]))
        out = [same] * n
        out[draw(st.integers(0, n - 1))] = other
    elif regime == "signed":
        scale = 10.0 ** draw(st.sampled_from([-300, 0, 200, 307]))
        out = [draw(st.sampled_from([0.0, -1.0, 1.0, -2.5, 3.0, 1.7])) * scale for _ in range(n)]
    elif regime == "bigint":
        out = [float(2**53 + draw(st.integers(-5, 5)) * draw(st.sampled_from([1, 3, 2**20]))) for _ in range(n)]
    else:
        out = [draw(st.floats(1.0, 1e6)) for _ in range(n)]
    for i in range(n):
        if draw(st.integers(0, 24)) == 0:
            out[i] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    return out


@st.composite
def edge_shapes(draw: Any) -> Shape:
    """A result of 1 to 3 configs, each config's runs from its own regime (one row per config and metric)."""
    configs = draw(st.integers(1, 3))
    runs = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 9, 17, 40]))
    values = [draw(regime_values(runs)) for _ in range(configs)]
    regions = {("a", c, r): [{TIME: values[c][r]}] for c in range(configs) for r in range(runs)}
    return Shape(
        configs=[(c + 1,) for c in range(configs)],
        params=("n",),
        runs=runs,
        annotations=("a",),
        metrics=(TIME,),
        combine=False,
        derive=draw(st.booleans()),  # a derived metric (twice the time) next to the durations
        regions=regions,
    )


# --- the reference ------------------------------------------------------------------------------------------


def _float(x: Fraction) -> float:
    """``x`` rounded once to a float; inf past the float range."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _sqrt(x: Fraction) -> float:
    """The square root of a non-negative ``x``, to a float (also where ``x`` itself is past the float range)."""
    if x == 0:
        return 0.0
    k = (x.numerator.bit_length() - x.denominator.bit_length()) // 2
    root = math.sqrt(float(x / Fraction(4) ** k))
    try:
        return math.ldexp(root, k)
    except OverflowError:
        return math.inf


def _median(values: list[float]) -> float:
    ordered, n = sorted(values), len(values)
    if n % 2:
        return ordered[n // 2]
    a, b = ordered[n // 2 - 1], ordered[n // 2]
    if not (math.isfinite(a) and math.isfinite(b)):
        return (a + b) / 2
    return _float((Fraction(a) + Fraction(b)) / 2)


def reference_row(values: list[float]) -> dict[str, Any]:
    """docs/api.md's columns of one row from its runs (NaN runs are not valid runs)."""
    valid = [v for v in values if not math.isnan(v)]
    n = len(valid)
    row: dict[str, Any] = {"NumRuns": n}
    if not n:
        return row
    row["MinValue"], row["MaxValue"], row["MedianValue"] = min(valid), max(valid), _median(valid)
    if not all(map(math.isfinite, valid)):
        pos, neg = math.inf in valid, -math.inf in valid
        row["AvgValue"] = math.nan if pos and neg else (math.inf if pos else -math.inf)
        row["CI"] = (math.nan, math.nan)  # documented: a run with an infinite value makes it NaN
        return row
    exact = [Fraction(v) for v in valid]
    mean = sum(exact) / n
    row["AvgValue"] = _float(mean)
    row["scale"] = max(abs(v) for v in valid)
    row["mean_abs"] = float(sum(abs(x) for x in exact) / n)
    if n < 2:
        row["CI"] = (math.nan, math.nan)
        return row
    var = sum((x - mean) ** 2 for x in exact) / (n - 1)
    row["StdDev"] = std = _sqrt(var)
    if not math.isfinite(std):
        return row  # the docs are silent past the float range
    avg = row["AvgValue"]  # docs: 100 x StdDev / |AvgValue| (a mean that rounds to 0 is a zero mean)
    rsd = _float(100 * Fraction(std) / abs(Fraction(avg))) if avg != 0 else math.nan
    row["RelativeStdDevPct"] = rsd if math.isfinite(rsd) else math.nan
    row["CI"] = _interval(valid, mean, var)
    return row


def _interval(values: list[float], mean: Fraction, var: Fraction) -> tuple[float, float]:
    """docs/api.md, "The interval of the mean", over exact moments (scipy's t quantile)."""
    n, low = len(values), min(values)
    if var == 0:
        return _float(mean), _float(mean)  # all runs equal: the mean itself
    t = Fraction(float(scipy.stats.t.ppf(0.975, n - 1)))
    half = t * Fraction(_sqrt(var)) / Fraction(math.sqrt(n))
    t_low, t_high = mean - half, mean + half
    if low <= 0:
        return (_float(max(t_low, Fraction(0))) if low == 0 else _float(t_low)), _float(t_high)
    floor = Fraction(low) * Fraction(0.025 ** (1 / n))
    if n < 5:
        return _float(max(t_low, floor)), _float(t_high)
    logs = [math.log(v) for v in values]
    m = math.fsum(logs) / n
    v = math.fsum((x - m) ** 2 for x in logs) / (n - 1)
    reach = float(t) * math.sqrt(v / n + v * v / (2 * (n - 1)))
    cox_low, cox_high = _exp(m + v / 2 - reach), _exp(m + v / 2 + reach)
    lower = max(min(_float(t_low), cox_low), _float(floor))
    return lower, max(_float(t_high), cox_high)


def _exp(x: float) -> float:
    return math.inf if x > 709.78 else math.exp(x)


def close(got: float, want: float, abs_tol: float) -> bool:
    """Equal to a relative 1e-9 or ``abs_tol``; NaN is NaN; an end past the float range is inf."""
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want) or math.isinf(got):
        return got == want or (math.isinf(got) and abs(want) > MAX * (1 - 1e-8) and got * want > 0)
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=abs_tol)


def check_row(got: Any, want: dict[str, Any], key: Any) -> None:
    """One frame row against its reference row (the module docstring's tolerances)."""
    assert int(got["NumRuns"]) == want["NumRuns"], key
    if not want["NumRuns"]:
        return
    for col in ("MinValue", "MaxValue", "MedianValue"):
        assert got[col] == want[col] or (math.isnan(got[col]) and math.isnan(want[col])), (key, col, got[col], want)
    scale = want.get("scale", 0.0)
    assert close(got["AvgValue"], want["AvgValue"], 1e-9 * want.get("mean_abs", 0.0) + SUB), (key, got["AvgValue"])
    if "StdDev" in want:
        spread_tol = 1e-9 * scale + SUB
        assert close(got["StdDev"], want["StdDev"], spread_tol), (key, "StdDev", got["StdDev"], want)
    lower, upper = float(got["CI95_Lower"]), float(got["CI95_Upper"])
    if "CI" in want:
        tol = 1e-9 * scale + SUB
        assert close(lower, want["CI"][0], tol) and close(upper, want["CI"][1], tol), (key, lower, upper, want)
    mean_tol = 1e-9 * want.get("mean_abs", 0.0) + SUB
    if "RelativeStdDevPct" in want and abs(want["AvgValue"]) <= mean_tol and math.isnan(got["RelativeStdDevPct"]):
        pass  # the exact mean is within the mean's own tolerance of 0: a ratio to it has no digits (NaN is right)
    elif "RelativeStdDevPct" in want:
        rsd, avg = want["RelativeStdDevPct"], abs(got["AvgValue"])
        tol = 100 * (1e-9 * scale + SUB) / avg if avg else 0.0
        assert close(got["RelativeStdDevPct"], rsd, tol), (key, "RSD", got["RelativeStdDevPct"], want)
        stable = got["StableMeasurement"]
        if math.isnan(rsd):
            assert stable is None or stable is False or str(stable) == "<NA>", (key, stable)
        elif abs(rsd - 2.0) > tol + 1e-9:
            assert bool(stable) == (rsd < 2.0 and want["NumRuns"] >= 5), (key, "Stable", stable, rsd)
    mean = got["AvgValue"]
    if not math.isnan(lower):  # docs: the interval always contains AvgValue
        assert lower <= mean <= upper, (key, lower, mean, upper)
        # docs/flags.md: unstable when the interval's farther end is more than 2 % of the mean from it
        ratio = 100 * max(upper - mean, mean - lower) / abs(mean) if mean else math.nan
        if math.isfinite(ratio) and abs(ratio - 2.0) > 1e-6:
            assert ("unstable" in got["Flags"].split(",")) == (ratio > 2.0), (key, got["Flags"], ratio)


def check(shape: Shape) -> None:
    """The frame of ``shape`` against the reference, row by row (matched by metric and config)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = build(shape).to_dataframe()
    rows = {(r["Metric"], r["n"]): r for _, r in frame.iterrows()}
    want = per_run_values(shape)
    assert len(rows) == len(want)
    for (_ann, metric, c), runs in want.items():
        check_row(rows[(metric, c + 1)], reference_row([v for _, v, _ in runs]), (metric, c, runs))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=edge_shapes())
def test_statistics_at_the_edges_match_the_exact_reference(shape: Shape) -> None:
    check(shape)


def _one_row(values: list[float], derive: bool = False) -> Shape:
    return Shape(
        configs=[(1,)],
        params=("n",),
        runs=len(values),
        annotations=("a",),
        metrics=(TIME,),
        combine=False,
        derive=derive,
        regions={("a", 0, r): [{TIME: v}] for r, v in enumerate(values)},
    )


EDGES = [
    [1e308, 1.5e308],  # fsum of the flags' rule raised OverflowError out of to_dataframe()
    [1e200, 3e200, 2e200, 5e200, 4e200],  # StdDev inf: no interval, no RSD
    [-1e308, 1e308, 0.0],  # StdDev NaN
    [1e-300, 2e-300, 3e-300, 4e-300, 5e-300],  # StdDev 0: a one-point interval, RSD 0, StableMeasurement true
    [5e-324, 1e-323, 1.5e-323, 2e-323, 2.5e-323],  # the same in subnormals
    [1e306, 1.7e308, 1e306],  # a t half-width whose t * std overflowed
    [math.inf, 1.7e308, 1.7e308, 1.7e308],  # MedianValue inf (the half sum of the middles overflowed)
    [-math.inf, 1.7e308, 1.7e308],  # AvgValue NaN, the mean is -inf
]


@pytest.mark.parametrize("values", EDGES, ids=range(len(EDGES)))
def test_a_row_at_the_float_range_edge_matches_the_reference(values: list[float]) -> None:
    check(_one_row(values))


def test_a_derived_row_whose_half_width_is_past_the_float_range_matches_the_reference() -> None:
    """Runs of -1e307 and -2.5e307, doubled: a t half-width of 1.9e308 (inf), so both ends were inf, the upper
    end 1.56e308 in fact (a random draw of the property above)."""
    check(_one_row([-1e307, -2.5e307], derive=True))


def test_a_mean_that_cancels_to_a_subnormal_may_have_no_relative_spread() -> None:
    """Runs of 0, -1e-300, -2.5e-300 (x2), 3e-300 (x2) (a random draw of the property above): their exact mean is a
    subnormal left by the decimal inputs' binary rounding, 0 in float arithmetic; 100 x StdDev / 7.6e-317 (3e18 %)
    has no correct digit, so the library's NaN RSD is right."""
    check(_one_row([0.0, -1e-300, -2.5e-300, -2.5e-300, 3e-300, 3e-300]))


def test_tiny_distinct_runs_are_not_called_stable() -> None:
    """Five runs of 1e-300 .. 5e-300 (an RSD of 53 %): the squares underflowed to a spread of 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = build(_one_row([1e-300, 2e-300, 3e-300, 4e-300, 5e-300])).to_dataframe()
    row = frame.iloc[0]
    assert row["StableMeasurement"] is False or not bool(row["StableMeasurement"])
    assert row["CI95_Lower"] < row["AvgValue"] < row["CI95_Upper"]
    assert "unstable" in row["Flags"]


def test_the_scalar_interval_and_the_adaptive_rule_take_huge_runs() -> None:
    """``mean_interval`` (the flags' and ``runs="auto"``'s rule) summed 1e308s with ``math.fsum``: OverflowError."""
    from nsightx._results.stats import mean_interval
    from nsightx._run.adaptive import relative_half_width

    values = [1.5e308, 1.6e308, 1.55e308, 1.52e308, 1.58e308]
    lower, upper = mean_interval(values)
    assert 1.49e308 < lower < 1.55e308 < upper < 1.61e308
    assert 3.3 < relative_half_width(values) < 3.4  # 100 * reach overflowed: inf


@pytest.mark.parametrize("size", [1e300, 1e-300])
def test_a_hundred_thousand_runs_at_an_edge_match_the_reference(size: float) -> None:
    """10**5 runs (pandas' groupby path past 8192 rows, the flags' numpy sums) of values near 1e300 or 1e-300."""
    runs = 100_000
    values = [(1.0 + (r * 7919 % 1000) / 1000.0) * size for r in range(runs)]
    check(_one_row(values))


def test_a_host_call_whose_derived_metric_is_huge_matches_the_reference() -> None:
    """Through the host backend: the derived values are read back from ``runs_dataframe()``."""
    import nsightx

    drawn = iter([3e300 * (1 + (k % 7) / 10) for k in range(100)])

    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=6,
        warmup=0,
        backend="host",
        derive_metric=lambda t, n: (next(drawn), "x"),
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        with nsightx.annotate("a"):
            sum(range(n))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sweep()
    frame, runs = result.to_dataframe(), result.runs_dataframe()
    derived = frame[frame["Metric"] == "<lambda>"]
    assert len(derived) == 2
    for _, row in derived.iterrows():
        mine = runs[(runs["Metric"] == row["Metric"]) & (runs["n"] == row["n"])]
        check_row(row, reference_row(mine["Value"].tolist()), row["n"])
