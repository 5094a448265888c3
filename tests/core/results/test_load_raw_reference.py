"""``nsightx.load_raw`` with ``combine_kernel_metrics`` / ``derive_metric`` given at load time, against the call.

docs/api.md (``nsightx.load_raw``): functions are not stored in a raw file, so the same ``combine_kernel_metrics``
and ``derive_metric`` are passed again at load time. The reference is then the same result made in memory: the
frames of the loaded result (``to_dataframe``, ``runs_dataframe``) must equal, cell for cell, those of the call
(a real host-backend call with ``output_prefix``) or of ``build_results`` given the same runs and functions
(random runs of several kernels a region written through the run loop's own ``RunSink``, some of whose values are
inf, -inf or NaN). The reference saved as .json and as .parquet and loaded back must equal it too, records included
(files21: a measured inf was written to the raw file and the .json result as ``null`` and came back NaN).

Where docs/api.md is silent this does not guess: the environment differs (``raw_data``, ``sweep``), so only the
frames are compared, not ``environment``.
"""

from __future__ import annotations

import math
import operator
import os
import random
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo, RawHeader
from nsightx._results.sink import RunSink

SILENT = nsightx.VerbosityLevel.SILENT
EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "25"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
TIME, BYTES = "gpu__time_duration.sum", "dram__bytes_read.sum"
UNITS = {TIME: "ns", BYTES: "byte"}
NON_FINITE = (math.inf, -math.inf, math.nan)
"""Measured values a backend or a derived metric may produce, which a saved file must give back as they were."""


def frames_equal(got: ProfileResults, want: ProfileResults) -> None:
    """The loaded result's frames and records equal the reference's, cell for cell and dtype for dtype."""
    for name in ("to_dataframe", "runs_dataframe"):
        a, b = getattr(got, name)(), getattr(want, name)()
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=name)
    assert _records(got) == _records(want)


def _records(result: ProfileResults) -> list[tuple[Any, ...]]:
    """The result's records as tuples, NaN as a string (NaN equals nothing, itself included)."""
    return [
        (r.annotation, r.config, r.run, r.kernel, r.metric, "<nan>" if math.isnan(r.value) else r.value, r.unit)
        for r in result.records
    ]


# --- derive functions of every documented return shape (number, (number, unit), dict) ------------------------


def derive_number(t: float, *config: Any) -> float:
    return t * 2.0 + len(config)


def derive_unit(t: float, *config: Any) -> tuple[float, str]:
    return (1e3 / t if t else math.inf, "1/us")


def derive_dict(t: float, *config: Any) -> dict[str, Any]:
    return {"twice": 2.0 * t, "rate": (t / 7.0, "x/s")}


def derive_two(t: float, b: float, *config: Any) -> dict[str, Any]:
    return {"per_byte": (t / b if b else math.nan, "ns/byte")}


DERIVES = [None, derive_number, derive_unit, derive_dict]
COMBINES = [None, operator.add, max, lambda a, b: a - b, lambda a, b: 2.0 * a + b]


# --- a real host-backend call ---------------------------------------------------------------------------------


@pytest.mark.parametrize("derive", DERIVES, ids=lambda d: getattr(d, "__name__", "none"))
@pytest.mark.parametrize("combine", [None, operator.add], ids=["nocombine", "add"])
def test_load_raw_of_a_host_call_equals_the_call(
    plugin_host: object, tmp_path: Path, derive: Any, combine: Any
) -> None:
    @nsightx.analyze.kernel(
        configs=[(1, "a|b`c"), (3, "ü\nß"), (2, None)],
        runs=3,
        warmup=0,
        backend="host",
        verbosity=SILENT,
        output_prefix=str(tmp_path) + "/",
        derive_metric=derive,
        combine_kernel_metrics=combine,
    )
    def f(n: int, label: Any) -> None:
        with nsightx.annotate("one | two"):
            sum(range(n))
        with nsightx.annotate("`x`"):
            sum(range(n + 1))

    res = f()
    raw = Path(str(res.environment["raw_data"]))
    frames_equal(nsightx.load_raw(raw, combine_kernel_metrics=combine, derive_metric=derive), res)
    if derive is None:
        frames_equal(nsightx.load(raw), res)


# --- random runs of several kernels a region, through the run loop's sink -------------------------------------


@st.composite
def sweeps(draw: Any) -> tuple[PlanInfo, list[RunRecords], Any, Any]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    metrics = draw(st.sampled_from([(TIME,), (TIME, BYTES)]))
    n_configs, runs = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    configs = tuple((c * 8 + 1, draw(st.sampled_from(["s", "a|b", "\n", "é", None]))) for c in range(n_configs))
    anns = ("gemm", "copy | x")[: draw(st.integers(1, 2))]
    plan = PlanInfo(
        function="bench",
        params=("n", "label"),
        configs=configs,
        runs=runs,
        warmup=0,
        metrics=metrics,
        backend="cupti",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
    )
    combine = draw(st.sampled_from(COMBINES[1:]))
    derive = draw(
        st.sampled_from([None, derive_number, derive_dict, derive_unit] + ([derive_two] * (len(metrics) == 2)))
    )
    out = []
    for c in range(n_configs):
        for r in range(runs):
            records, regions = [], []
            for ann in anns:
                failed = rng.random() < 0.1 and (c, r) != (0, 0)
                regions.append(RegionRun(annotation=ann, config=c, run=r, host_ns=1000 + r, failed=failed))
                if failed:
                    continue
                for k in range(rng.randint(1, 3)):
                    for m in metrics:
                        value = rng.choice([rng.uniform(1.0, 1e6), float(rng.randint(1, 50)), rng.uniform(-5, 5)])
                        if rng.random() < 0.08:  # a backend's inf or NaN (files21: inf came back NaN)
                            value = rng.choice(NON_FINITE)
                        records.append(
                            Record(
                                annotation=ann, config=c, run=r, kernel=f"k{k}", metric=m, value=value, unit=UNITS[m]
                            )
                        )
            out.append(RunRecords(config=c, run=r, records=tuple(records), regions=tuple(regions)))
    return plan, out, combine, derive


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(sweeps())
def test_load_raw_of_several_kernels_equals_build_results(example: tuple[PlanInfo, list[RunRecords], Any, Any]) -> None:
    plan, runs, combine, derive = example
    folder = Path(tempfile.mkdtemp(prefix="nsightx-rawref-"))
    raw = folder / "raw_data-bench-0.jsonl"
    header = RawHeader(
        sweep="0" * 32, nsightx_version=nsightx.__version__, created="2026-12-06T00:00:00+00:00", plan=plan
    )
    sink = RunSink(raw, header)
    for run in runs:
        sink.write(run)
    sink.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        environment = {"Host": None, "nsightx": nsightx.__version__, "raw_data": str(raw), "sweep": header.sweep}
        want = build_results(plan, runs, environment, combine=combine, derive_metric=derive, created=header.created)
        got = nsightx.load_raw(raw, combine_kernel_metrics=combine, derive_metric=derive)
        saved = [nsightx.load(want.save(folder / f"r.{suffix}")) for suffix in ("json", "parquet")]
    frames_equal(got, want)
    for back in saved:  # the saved result keeps every value, inf and NaN included, in both formats
        frames_equal(back, want)
