"""A broken transform or a function that measures nothing fails after its first run, not after the whole sweep."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from _sessions import DeferredHost
from nsightx_host import HostBackend

import nsightx
from nsightx import AnnotationError, ConfigError, KernelCountError, MeasurementError, TransformError
from nsightx._api.firstrun import CheckedSink, FirstRunCheck
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._run import backend as _backend
from nsightx._run.backend import COLLECT_EVERY
from nsightx._run.plan import Plan
from nsightx._spec.options import build_spec
from nsightx.ext import Session

SILENT = nsightx.VerbosityLevel.SILENT
METRIC = "host__time_duration.sum"


def _sweep(calls, **options):
    """A 3-config x 5-run host sweep whose body appends to ``calls``."""
    options = {"runs": 5, "warmup": 0, "backend": "host", "verbosity": SILENT, "configs": [1, 2, 3], **options}

    @nsightx.analyze.kernel(**options)
    def work(n):
        calls.append(n)
        with nsightx.annotate("a"):
            pass

    return work


def bad_str(t, n):
    return "fast"


def bad_none(t, n):
    return None


def bad_list(t, n):
    return [t]


def bad_unit(t, n):
    return t, 3


def bad_triple(t, n):
    return t, "ns", "extra"


def bad_key(t, n):
    return {1: t}


def bad_entry(t, n):
    return {"rate": (None, "1/s")}


@pytest.mark.parametrize(
    ("fn", "returned", "problem"),
    [
        (bad_str, "'fast' (str)", "not a number"),
        (bad_none, "None (NoneType)", "not a number"),
        (bad_list, "(list)", "not a number"),
        (bad_unit, "(tuple)", "the unit 3 is of type int, not a str"),
        (bad_triple, "(tuple)", "a tuple must be (value, unit), this one has 3 item(s)"),
        (bad_key, "(dict)", "the key 1 is not a metric name"),
        (bad_entry, "(dict)", "'rate': the value None (NoneType) is not a number"),
    ],
)
def test_derive_returning_a_wrong_type_fails_after_one_run(plugin_host, fn, returned, problem):
    calls = []
    with pytest.raises(TransformError) as info:
        _sweep(calls, derive_metric=fn)()
    assert calls == [1]  # one run of fifteen
    msg = str(info.value)
    assert f"derive_metric {fn.__name__!r} returned" in msg and returned in msg
    assert "config 0 (1,)" in msg and problem in msg
    assert info.value.function == fn.__name__ and info.value.config == 0
    assert isinstance(info.value, TypeError)


def test_derive_that_raises_fails_after_one_run(plugin_host):
    calls = []

    def rate(t, n):
        return n / (t - t)

    with pytest.raises(MeasurementError, match=r"derive_metric 'rate' raised ZeroDivisionError.*config 0"):
        _sweep(calls, derive_metric=rate)()
    assert calls == [1]


def test_derived_metric_named_like_a_measured_one_is_refused(plugin_host):
    calls = []

    def micro(t, n):
        return {METRIC: (t / 1e3, "us")}

    with pytest.raises(ConfigError, match=rf"returned a metric named '{METRIC}', which is also measured"):
        _sweep(calls, derive_metric=micro)()
    assert calls == [1]


def test_good_derive_still_runs_the_whole_sweep(plugin_host):
    calls = []

    def rate(t, n):
        return {"per_n": (t / n, "ns"), "plain": t}

    with pytest.warns(UserWarning, match="does not have a unit specified") as record:
        df = _sweep(calls, derive_metric=rate)().to_dataframe()
    assert len(calls) == 15
    assert sorted(set(df["Metric"])) == sorted({METRIC, "per_n", "plain"})
    unitless = [w for w in record if "does not have a unit specified" in str(w.message)]
    assert len(unitless) == 1  # not once more for the first-run check


def test_function_without_annotation_fails_after_one_run(plugin_host):
    calls = []

    @nsightx.analyze.kernel(configs=[1, 2], runs=5, warmup=0, backend="host", verbosity=SILENT)
    def forgot(n):
        calls.append(n)
        sum(range(n))

    with pytest.raises(AnnotationError, match=r"nothing was measured: forgot opened no nsightx.annotate region") as e:
        forgot()
    assert 'nsightx.annotate("name")' in str(e.value)
    assert calls == [1]


def test_unknown_baseline_fails_after_one_run(plugin_host):
    calls = []
    with pytest.raises(ConfigError, match="normalize_against='base' names no annotation"):
        _sweep(calls, normalize_against="base")()
    assert calls == [1]


def test_ignoring_every_kernel_fails_after_one_run(plugin_host):
    calls = []
    with pytest.raises(ConfigError, match=r"ignore_kernel_list=\['region'\] drops every kernel work launched"):
        _sweep(calls, ignore_kernel_list=["region"])()
    assert calls == [1]


def test_failed_first_run_is_stored_once_in_the_raw_file(plugin_host, tmp_path):
    calls = []
    with pytest.raises(TransformError):
        _sweep(calls, derive_metric=bad_str, output_prefix=str(tmp_path) + "/")()
    (raw,) = tmp_path.glob("*raw_data*.jsonl")
    runs = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    measured = [r for r in runs if r.get("config", -1) >= 0 and "run" in r]
    assert [(r["config"], r["run"]) for r in measured] == [(0, 0)]


# --- the check itself, on runs a GPU backend would write (several kernels per region) -------------------------


def _plan(**kw) -> Plan:
    base = dict(
        function=lambda n: None,
        function_name="work",
        params=("n",),
        configs=((7,),),
        runs=1,
        warmup=0,
        metrics=("gpu__time_duration.sum",),
        backend="cupti",
    )
    base.update(kw)
    return Plan(**base)


def _two_kernels() -> RunRecords:
    recs = tuple(
        Record(annotation="a", config=0, run=0, kernel=k, metric="gpu__time_duration.sum", value=v, unit="ns", seq=i)
        for i, (k, v) in enumerate((("gemm", 10.0), ("reduce", 2.0)))
    )
    return RunRecords(config=0, run=0, records=recs, regions=(RegionRun(annotation="a", config=0, run=0, host_ns=100),))


def test_combine_returning_a_str_is_caught_on_the_first_run():
    check = FirstRunCheck(_plan(), build_spec(combine_kernel_metrics=lambda a, b: f"{a}+{b}"))
    with pytest.raises(TransformError, match=r"combine_kernel_metrics .* returned '10\.0\+2\.0' \(str\)") as e:
        check(_two_kernels())
    assert e.value.config == 0 and e.value.returned == "10.0+2.0"


def test_several_kernels_without_combine_is_caught_on_the_first_run():
    with pytest.raises(KernelCountError, match=r"More than one \(total=2\) kernel is launched within the a annotation"):
        FirstRunCheck(_plan(), build_spec())(_two_kernels())


def test_good_combine_and_derive_pass():
    spec = build_spec(combine_kernel_metrics=operator.add, derive_metric=lambda t, n: (t / n, "ns"))
    FirstRunCheck(_plan(), spec)(_two_kernels())


def test_checked_sink_checks_the_first_measured_run_only():
    seen = []
    sink = CheckedSink(check=seen.append)
    once = RunRecords(config=-1, run=-1)
    sink.write(once)
    sink.write(_two_kernels())
    sink.write(_two_kernels().model_copy(update={"run": 1}))
    assert [r.run for r in seen] == [0]
    assert [r.run for r in sink.runs] == [-1, 0, 1]


def test_checked_sink_keeps_the_run_that_failed_the_check_once():
    def refuse(run):
        raise TransformError("no")

    sink = CheckedSink(check=refuse)
    first = _two_kernels()
    with pytest.raises(TransformError):
        sink.write(first)
    sink.write(first)  # the run loop's clean-up writes it again
    sink.write(first.model_copy(update={"run": 1}))
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]
    assert sink.runs[0].records == first.records


def test_failed_first_region_is_not_derived():
    """A region that raised under ignore_failures has NaN values, which derive_metric never sees."""
    failed = RunRecords(config=0, run=0, regions=(RegionRun(annotation="a", config=0, run=0, host_ns=1, failed=True),))
    FirstRunCheck(_plan(), build_spec(derive_metric=bad_str))(failed)  # no TransformError: bad_str was not called


def test_ncu_runs_are_checked_when_the_parent_writes_the_first_one(monkeypatch, tmp_path):
    """The ncu backend measures in a worker and writes its runs to the sink afterwards: the check fires there."""
    pytest.importorskip("cloudpickle")
    pytest.importorskip("nvtx")
    pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")
    import ncu_fake
    from nsightx_ncu._backend import NcuBackend

    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    def label(t, n):
        return f"{t} ns"

    plan = ncu_fake.make_plan(scale)
    sink = CheckedSink(check=FirstRunCheck(plan, build_spec(derive_metric=label)))
    with pytest.raises(TransformError, match=r"derive_metric 'label' returned '.* ns' \(str\)"):
        NcuBackend().execute(plan, sink)
    assert [(r.config, r.run) for r in sink.runs if r.config >= 0] == [(0, 0)]


class _DeferredHostBackend(HostBackend):
    """The host backend with the deferred host session (``_sessions.DeferredHost``), as the GPU backends are."""

    name = "deferred_firstrun"

    @contextmanager
    def session(self, plan: Any) -> Iterator[Session]:
        yield DeferredHost()


class _DeferredPlugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(_DeferredHostBackend)


@pytest.mark.parametrize(
    ("seconds", "configs", "runs", "calls_before_the_error"),
    [
        (math.inf, [1, 2, 3], 5, 15),  # no second passes: the first collection is the call's end, all 15 runs
        (0.0, [1, 2, 3], 5, 5),  # a second "passed" at every config end: the first config's end
        (math.inf, [1, 2], 40, COLLECT_EVERY),  # the 64th run, in the second config
    ],
)
def test_a_deferred_session_is_checked_at_its_first_collection(
    plugin_host, monkeypatch, seconds, configs, runs, calls_before_the_error
):
    """docs/reliability.md "Bad input": on a deferred backend "after the first measured run" is the first
    collection: at the COLLECT_EVERY-th (64th) run, at a config's end once COLLECT_SECONDS (1 s) passed since the
    call started, or at the call's end. A fast sweep of fewer runs than that runs to its end before "nothing was
    measured". The second is set here (inf or 0) so that no timing decides where the error comes."""
    monkeypatch.setattr(_backend, "COLLECT_SECONDS", seconds)
    plugin_host.register(_DeferredPlugin(), name="deferred_firstrun")
    calls = []

    @nsightx.analyze.kernel(configs=configs, runs=runs, warmup=0, backend="deferred_firstrun", verbosity=SILENT)
    def forgot(n):
        calls.append(n)

    with pytest.raises(AnnotationError, match="nothing was measured"):
        forgot()
    assert len(calls) == calls_before_the_error
