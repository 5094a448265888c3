"""nsightx.annotate: context manager and decorator, nesting and reuse errors, ignored failures."""

from __future__ import annotations

import math

import pytest

import nsightx
from nsightx import AnnotationError

SILENT = nsightx.VerbosityLevel.SILENT


def profile(fn, **options):
    options.setdefault("runs", 2)
    return nsightx.analyze.kernel(configs=[(1,)], backend="host", verbosity=SILENT, **options)(fn)()


def test_outside_a_profiled_call_annotate_is_a_no_op():
    with nsightx.annotate("free"):
        x = 1
    assert x == 1

    @nsightx.annotate("deco")
    def g(a):
        return a + 1

    assert g(1) == 2


def test_decorator_form_is_one_region(plugin_host):
    @nsightx.annotate("inner")
    def work():
        return sum(range(100))

    def f(n):
        work()

    assert profile(f).to_dataframe()["Annotation"].tolist() == ["inner"]


def test_nested_annotation_is_error(plugin_host):
    def f(n):
        with nsightx.annotate("outer"), nsightx.annotate("inner"):
            pass

    with pytest.raises(AnnotationError, match="Nested annotations are not supported") as info:
        profile(f)
    assert isinstance(info.value, ValueError)


def test_reused_name_in_one_run_is_error(plugin_host):
    def f(n):
        for _ in range(2):
            with nsightx.annotate("same"):
                pass

    with pytest.raises(AnnotationError, match="has already been used in this profiling run"):
        profile(f)


def test_same_name_in_successive_runs_is_fine(plugin_host):
    def f(n):
        with nsightx.annotate("same"):
            pass

    assert profile(f, runs=3).to_dataframe()["NumRuns"].tolist() == [3]


def test_empty_name_is_type_error():
    with pytest.raises(TypeError):
        nsightx.annotate("")


@pytest.mark.parametrize("name", [" ", "\t", " \n "])
def test_a_blank_name_is_refused_naming_it(name):
    # reads as no name in every table, and two such regions would look alike (session 23 decisions)
    with pytest.raises(nsightx.ConfigError, match="only whitespace") as info:
        nsightx.annotate(name)
    assert repr(name) in str(info.value)


def test_a_name_with_outer_whitespace_is_kept_as_written(plugin_host):
    def f(n):
        with nsightx.annotate(" a "):
            pass
        with nsightx.annotate("a"):
            pass

    assert sorted(profile(f).to_dataframe()["Annotation"]) == [" a ", "a"]


def test_measure_refuses_a_blank_name_before_any_run():
    calls = []
    with pytest.raises(nsightx.ConfigError, match="only whitespace"):
        nsightx.measure(lambda: calls.append(1), name="  ", backend="host")
    assert calls == []


def test_ignore_failures_gives_nan_and_keeps_going(plugin_host):
    calls = {"n": 0}

    def f(n):
        calls["n"] += 1
        with nsightx.annotate("flaky", ignore_failures=True):
            if calls["n"] == 2:  # the first measured run (after one warm-up)
                raise RuntimeError("boom")
        with nsightx.annotate("fine"):
            pass

    with pytest.warns(RuntimeWarning, match="boom"):
        res = profile(f, runs=3)
    df = res.to_dataframe().set_index("Annotation")
    assert df.loc["flaky", "NumRuns"] == 2
    assert df.loc["fine", "NumRuns"] == 3
    assert df.loc["flaky", "Kernel"] == "region"  # a failed run never names the row's kernel
    runs = res.runs_dataframe()
    failed = runs[(runs["Annotation"] == "flaky") & (runs["Run"] == 0)]
    assert math.isnan(failed["Value"].iloc[0]) and failed["Kernel"].iloc[0] == "failed"


def test_failure_without_ignore_propagates(plugin_host):
    def f(n):
        with nsightx.annotate("bad"):
            raise KeyError("x")

    with pytest.raises(KeyError):
        profile(f)


def test_ignore_failures_context_swallows():
    with nsightx.analyze.ignore_failures():
        raise ValueError("warm-up failure")


def test_a_name_with_a_lone_surrogate_is_refused_before_anything_is_written(tmp_path):
    """Such a name measured fine and then failed every write with a pydantic serialisation error."""

    def fn(n):
        with nsightx.annotate("a\ud800"):
            pass

    with pytest.raises(nsightx.ConfigError, match=r"holds '\\ud800' at position 1"):
        profile(fn, output_prefix=str(tmp_path / "x_"))
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".json", ".parquet")]
    with nsightx.annotate("café ∑ 名前"):  # valid non-ASCII text stays accepted
        pass
