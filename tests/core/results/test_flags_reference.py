"""The ``Flags`` column against a naive reference written from docs/flags.md, with rows drawn onto the thresholds.

``test_frame_reference`` checks the flags on coarse values; here each row's runs are drawn around the thresholds
(a time mean near 5 us, an interval reaching about 2 % of the mean, clocks spanning about 3 % of their median,
launch verdicts split half and half) and in results large enough (over 512 values) for the vectorised paths of
``table_flags``. The reference reads docs/flags.md and nothing else:

- ``warm``: ``cache_control="none"``;
- ``short``: unit ``ns`` and the mean of the row's finite values (the ``AvgValue`` a row without an infinity
  shows) under 5000;
- ``few_runs``: fewer than 5 finite values;
- ``throttled``: a run with a finite value was throttled (docs/plugins.md's rule: a reason other than
  ``gpu_idle``/``applications_clocks_setting``, or an SM clock under 90 % of the call's median);
- ``clock_varied``: the finite, non-idle SM clocks of the row's runs span more than 3 % of their median, in exact
  (rational) arithmetic on the stored floats;
- ``unstable``: the interval of the mean (docs/api.md; of the finite values where a run is infinite) reaches more
  than 2 % of the mean's size from the mean;
- ``launch_bound``: in more than half of the region's runs that did not fail and have a verdict, the backend's
  ``launch_bound`` attribute, else host time > GPU time (``device_ns``, else ``span_ns``, else the time records);
  never when the backend serialises kernels;
- ``serialized``: the backend serialises kernels and a run of the region (failed or not) launched more than one.

Flags are computed before normalisation, so a normalised result has the flags of the same result without it, and a
saved result gets the same flags when loaded. Where the docs leave a verdict open (which runs ``clock_varied``
reads when a value is not finite, a zero mean for ``unstable``, a row within rounding of a threshold), the
reference states nothing for that flag of that row.
"""

from __future__ import annotations

import math
import os
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frame_reference import FAILED, TIME, Shape, build, mean_interval, per_run_values, run_unit, throttled_runs

import nsightx
from nsightx._results.dataframe import throttled_runs as frame_throttled_runs
from nsightx._results.flags import FLAGS, row_flags

EXAMPLES = int(os.environ.get("NSIGHTX_FLAGS_EXAMPLES", "40"))
"""Examples per run (more while hunting: ``NSIGHTX_FLAGS_EXAMPLES=400``)."""

CENTRES = st.sampled_from([5000.0, 4999.999, 5000.000001, 4999.0, 5001.0, 120.0, 1e6, -5000.0, 0.0])
"""Row means on either side of ``SHORT_NS`` (and far from it, negative and zero)."""
JITTER = st.sampled_from([0.0, 1e-9, 0.001, 0.005, 0.01, 0.0125, 0.02, 0.05])
"""Relative spread of a row's runs: an interval from nothing to well past 2 % of the mean."""
CLOCK_STEPS = st.sampled_from([0.0, 10.0, 15.0, 29.9, 30.0, 30.1, 45.0, 200.0])
"""How far a run's SM clock is from 1000 MHz: ranges on both sides of 3 % of the median."""


@st.composite
def threshold_shapes(draw: Any) -> Shape:
    """A result whose rows sit near the thresholds; ``big`` ones hold over 512 values."""
    big = draw(st.integers(0, 4)) == 0
    n_configs = draw(st.integers(4, 9)) if big else draw(st.integers(1, 3))
    runs = draw(st.integers(20, 40)) if big else draw(st.integers(1, 8))
    shape = Shape(
        configs=[(c * 64 + 1,) for c in range(n_configs)],
        params=("n",),
        runs=runs,
        annotations=("gemm", "copy", "norm")[: draw(st.integers(1, 3))],
        metrics=(TIME, "bytes")[: draw(st.integers(1, 2))],
        combine=False,
        derive=draw(st.booleans()),
        cache_control=draw(st.sampled_from(["all", "none"])),
        serializes=draw(st.integers(0, 3)) == 0,
    )
    shape.normalize = draw(st.sampled_from([None, None, *shape.annotations]))
    failing = draw(st.integers(0, 2))
    rows = {(a, c): (draw(CENTRES), draw(JITTER)) for a in shape.annotations for c in range(n_configs)}
    for (a, c), (centre, jitter) in rows.items():
        for r in range(runs):
            if failing and draw(st.integers(0, 10 // failing)) == 0:
                shape.regions[(a, c, r)] = FAILED
                continue
            odd = draw(st.integers(0, 30))
            step = draw(st.sampled_from([-1.0, 0.0, 1.0]))
            value = math.inf if odd == 0 else math.nan if odd == 1 else centre * (1.0 + step * jitter)
            shape.regions[(a, c, r)] = [{m: value for m in shape.metrics}]
    _draw_evidence(draw, shape)
    return shape


def _draw_evidence(draw: Any, shape: Shape) -> None:
    """Clocks, reasons and launch evidence per run, drawn to split verdicts near their thresholds."""
    runs = [(c, r) for c in range(len(shape.configs)) for r in range(shape.runs)]
    if draw(st.booleans()):
        steps = draw(st.lists(CLOCK_STEPS, min_size=1, max_size=3))
        shape.collectors["MeasuredSMClockMHz"] = (
            "run",
            {w: 1000.0 + draw(st.sampled_from(steps)) * draw(st.sampled_from([-1, 1])) for w in runs},
        )
    if draw(st.booleans()):
        reasons = st.sampled_from(["none", "none", "none", "gpu_idle", "applications_clocks_setting", "sw_power_cap"])
        shape.collectors["ClockEventReasons"] = ("run", {w: draw(reasons) for w in runs})
    kind = draw(st.sampled_from(["none", "own", "device", "span", "records", "mixed"]))
    if kind == "none":
        return
    for key in shape.regions:
        shape.host_ns[key] = draw(st.sampled_from([4000, 5000, 6000]))
        attrs: dict[str, Any] = {}
        pick = draw(st.sampled_from(["own", "device", "span", "records"])) if kind == "mixed" else kind
        if pick == "own":
            attrs["launch_bound"] = draw(st.booleans())
        elif pick == "device":
            attrs["device_ns"] = draw(st.sampled_from([4000, 5000.0, 6000, True]))
        elif pick == "span":
            attrs["span_ns"] = draw(st.sampled_from([4000.0, 5000, 6000]))
        if draw(st.integers(0, 2)) == 0:
            attrs["kernel_count"] = draw(st.sampled_from([1, 2, 2.0, 0]))
        shape.attributes[key] = attrs


# --- the reference -------------------------------------------------------------------------------------------


def _number(value: Any) -> float:
    """A number attribute; NaN for a bool (docs/flags.md: a bool where a number is expected is ignored) or else."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _gpu_time(shape: Shape, ann: str, c: int, r: int) -> float | None:
    """The execution's GPU time; NaN without any; None where the docs leave it open (a time record not finite)."""
    attrs = shape.attributes.get((ann, c, r), {})
    for name in ("device_ns", "span_ns"):
        if _number(attrs.get(name)) > 0:
            return _number(attrs[name])
    got = shape.regions.get((ann, c, r))
    if TIME not in shape.metrics or got in (None, FAILED):
        return math.nan
    times = [k[TIME] for k in got]
    if not all(math.isfinite(t) and t > 0 for t in times):
        return None  # a NaN, infinite, zero or negative "GPU time": the docs do not say
    return math.fsum(times)


def _launch_bound(shape: Shape, ann: str, c: int) -> bool | None:
    """More than half of the judged, not failed executions were launch-bound (None: the docs leave it open)."""
    if shape.serializes:
        return False
    verdicts = []
    for r in range(shape.runs):
        got = shape.regions.get((ann, c, r))
        if got in (None, FAILED):
            continue
        own = shape.attributes.get((ann, c, r), {}).get("launch_bound")
        if isinstance(own, bool):
            verdicts.append(own)
            continue
        gpu = _gpu_time(shape, ann, c, r)
        if gpu is None:
            return None
        if gpu > 0:
            verdicts.append(shape.host_ns.get((ann, c, r), 1000 + r) > gpu)
    return 2 * sum(verdicts) > len(verdicts)


def _clock_varied(shape: Shape, c: int, runs: list[int]) -> bool:
    """The runs' finite, non-idle clocks span more than 3 % of their median (exactly, on the stored floats)."""
    clocks = shape.collectors.get("MeasuredSMClockMHz", ("run", {}))[1]
    reasons = shape.collectors.get("ClockEventReasons", ("run", {}))[1]
    kept = sorted(
        Fraction(_number(clocks.get((c, r))))
        for r in runs
        if math.isfinite(_number(clocks.get((c, r)))) and "gpu_idle" not in str(reasons.get((c, r), "")).split("|")
    )
    if len(kept) < 2:
        return False
    n = len(kept)
    median = kept[n // 2] if n % 2 else (kept[n // 2 - 1] + kept[n // 2]) / 2
    return median > 0 and 100 * (kept[-1] - kept[0]) > 3 * median


def _unstable(finite: list[float]) -> bool | None:
    """docs/flags.md: the interval's farther end more than 2 % of the mean from it; None within rounding of it."""
    if len(finite) < 2:
        return False
    mean = math.fsum(finite) / len(finite)
    if mean == 0:
        return None  # "2 % of the mean": the docs do not say what a zero mean gives
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lower, upper = mean_interval(finite)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return None
    ratio = 100.0 * max(upper - mean, mean - lower) / abs(mean)
    if abs(ratio - 2.0) <= 1e-6:
        return None  # SciPy's quantile against the library's: the last digits may differ
    return ratio > 2.0


def reference(shape: Shape) -> dict[tuple[Any, ...], dict[str, bool]]:
    """(Annotation, Metric, n) -> {flag: verdict} for every flag the docs decide for the row."""
    throttled = throttled_runs(shape)
    out = {}
    for (ann, metric, c), rows in per_run_values(shape).items():
        finite = [v for _, v, _ in rows if math.isfinite(v)]
        unit = next((u for u in (run_unit(metric, v, k) for _, v, k in rows) if u is not None), None)
        mean = math.fsum(finite) / len(finite) if finite else math.nan
        varied = {_clock_varied(shape, c, [r for r, v, _ in rows if every or math.isfinite(v)]) for every in (0, 1)}
        kernels = [
            _number(shape.attributes.get((ann, c, r), {}).get("kernel_count"))
            for r in range(shape.runs)
            if (ann, c, r) in shape.regions
        ]
        verdicts: dict[str, bool | None] = {
            "warm": shape.cache_control == "none",
            "short": unit == "ns" and mean < 5000.0,
            "few_runs": len(finite) < 5,
            "throttled": any(throttled.get((c, r), False) for r, v, _ in rows if math.isfinite(v)),
            "clock_varied": varied.pop() if len(varied) == 1 else None,
            "unstable": _unstable(finite),
            "launch_bound": _launch_bound(shape, ann, c),
            "serialized": shape.serializes and any(k > 1 for k in kernels),
        }
        out[(ann, metric, shape.configs[c][0])] = {k: v for k, v in verdicts.items() if v is not None}
    return out


def check_flags(frame: pd.DataFrame, want: dict[tuple[Any, ...], dict[str, bool]]) -> None:
    """Every row's ``Flags`` cell says what the reference decides, and every reference row is there once."""
    keys = [tuple(k) for k in frame[["Annotation", "Metric", "n"]].itertuples(index=False)]
    assert sorted(map(repr, keys)) == sorted(map(repr, want)), "rows"
    for key, cell in zip(keys, frame["Flags"], strict=True):
        names = cell.split(",") if cell else []
        assert names == sorted(set(names)) and set(names) <= set(FLAGS), (key, cell)
        got = {name: name in names for name in want[key]}
        assert got == want[key], (key, cell, {k: v for k, v in want[key].items() if got[k] != v})


def _frame(shape: Shape) -> pd.DataFrame | None:
    try:
        return build(shape).to_dataframe()
    except nsightx.ConfigError as error:  # no baseline to normalise against: test_frame_reference's property
        assert "no baseline value" in str(error) or "names no annotation" in str(error), error
        return None


SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@SETTINGS
@given(shape=threshold_shapes())
def test_flags_near_their_thresholds_match_the_docs(shape: Shape) -> None:
    want = reference(shape)
    frame = _frame(shape)
    if frame is None:
        return
    if not want:
        assert frame.empty
        return
    check_flags(frame, want)
    result = build(shape)  # the Python rules (``nsightx compare``'s) say the same
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        throttled = frame_throttled_runs(result.data)
    python = {(a, m, shape.configs[c][0]): flags for (a, m, c), flags in row_flags(result.data, throttled).items()}
    assert python == {key: tuple(n for n in FLAGS if n in cell.split(",")) for key, cell in _cells(frame).items()}


def _cells(frame: pd.DataFrame) -> dict[tuple[Any, ...], str]:
    return {(a, m, n): f for a, m, n, f in frame[["Annotation", "Metric", "n", "Flags"]].itertuples(index=False)}


@settings(
    max_examples=max(EXAMPLES // 4, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(shape=threshold_shapes())
def test_normalised_and_loaded_results_keep_the_flags(shape: Shape, tmp_path_factory: Any) -> None:
    shape.normalize = None
    plain = _frame(shape)
    assert plain is not None
    if plain.empty:
        return
    check_flags(plain, reference(shape))
    folder = Path(tmp_path_factory.mktemp("flags"))
    result = build(shape)
    for suffix in ("parquet", "json"):
        loaded = nsightx.load(result.save(folder / f"r.{suffix}")).to_dataframe()
        assert _cells(loaded) == _cells(plain), suffix
    for baseline in shape.annotations:
        shape.normalize = baseline
        normalised = _frame(shape)
        if normalised is not None:
            assert _cells(normalised) == _cells(plain), baseline
