"""Configs given in a container nsightx cannot sweep in a known order are refused by the call, wherever given."""

from __future__ import annotations

import pytest

import nsightx
from nsightx import ConfigTypeError

SILENT = nsightx.VerbosityLevel.SILENT


def _work(n):
    with nsightx.annotate("a"):
        pass


def _decorate(**options):
    return nsightx.analyze.kernel(runs=1, warmup=0, backend="host", verbosity=SILENT, **options)


BAD = [
    ({"a": 1}, "iterating it would give its keys only"),
    ({1: "x", 2: "y"}, "its keys only"),
    ({1, 2}, "has no order"),
    (frozenset({3}), "has no order"),
    ("ab", "got the str"),
    (b"ab", "got the str"),
    (bytearray(b"ab"), "bytearray"),
]


@pytest.mark.parametrize(("configs", "match"), BAD)
def test_bad_container_refused_at_decoration(plugin_host, configs, match):
    """Given at decoration (the name docs/reliability.md cites): checked there, raised by the call (issue 36)."""
    calls = []

    def work(n):
        calls.append(n)

    profiled = _decorate(configs=configs)(work)  # checked here, raised by the call (as nsight-python raises)
    with pytest.raises(ConfigTypeError, match=match):
        profiled()
    assert calls == []


@pytest.mark.parametrize(("configs", "match"), BAD)
def test_bad_container_refused_at_call_time(plugin_host, configs, match):
    profiled = _decorate()(_work)
    with pytest.raises(ConfigTypeError, match=match):
        profiled(configs=configs)


def test_lists_tuples_ranges_and_generators_still_work(plugin_host):
    profiled = _decorate()(_work)
    for configs in ([1, 2], (1, 2), range(1, 3), (n for n in (1, 2)), [(1,), (2,)]):
        assert profiled(configs=configs).to_dataframe()["n"].tolist() == [1, 2]


def test_a_str_parameter_with_a_lone_surrogate_is_refused_before_any_run(tmp_path):
    """It measured every run and then failed the writes with a pydantic serialisation error."""
    ran = []

    def fn(name):
        ran.append(name)

    decorated = _decorate(configs=[("ok",), ("b\udc80",)], output_prefix=str(tmp_path / "x_"))(fn)
    with pytest.raises(nsightx.ConfigError, match=r"config 1 has the str 'b\\udc80'"):
        decorated()
    assert ran == [] and list(tmp_path.iterdir()) == []
