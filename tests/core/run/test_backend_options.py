"""``BackendOptions.parse``: a bool, int or float option takes a value of its own type only, never a stand-in.

pydantic's lax mode used to read ``{"ncu_timeout_s": True}`` as a 1 s timeout and ``{"ncu_keep_report": "yes"}``
as True. The decorator's own options refuse such values (``output_csv="yes"``, ``warmup=True``), and so does every
backend option now, before anything runs, naming the key, the value and what is accepted.
"""

from __future__ import annotations

import re

import ncu_fake
import pytest
from nsightx_ncu._command import NcuOptions

import nsightx
from nsightx import ConfigTypeError, NsightxError
from nsightx.ext import BackendOptions


class _Scalars(BackendOptions):
    """A backend's options of each scalar kind (the first-party backends have no int one)."""

    count: int = 1
    """A count."""
    ratio: float = 1.0
    """A ratio."""
    limit_s: float | None = None
    """A limit."""
    loud: bool = False
    """A switch."""


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("count", True, "an int (not a bool)"),
        ("count", "3", "an int (not a bool)"),
        ("count", 3.0, "an int (not a bool)"),
        ("ratio", False, "a number (int or float, not a bool)"),
        ("ratio", "0.5", "a number (int or float, not a bool)"),
        ("limit_s", True, "a number (int or float, not a bool) or None"),
        ("loud", "yes", "True or False"),
        ("loud", "false", "True or False"),
        ("loud", 1, "True or False"),
        ("loud", 0.0, "True or False"),
    ],
)
def test_a_scalar_option_refuses_a_value_of_another_type(key, value, accepted):
    message = f"backend_options[{key!r}] must be {accepted}, got {type(value).__name__} {value!r} (the echo backend)"
    with pytest.raises(ConfigTypeError, match=re.escape(message)):
        _Scalars.parse({key: value}, "echo")


def test_a_scalar_option_takes_its_own_type():
    parsed = _Scalars.parse({"count": 3, "ratio": 2, "limit_s": 0.5, "loud": True}, "echo")
    assert (parsed.count, parsed.ratio, parsed.limit_s, parsed.loud) == (3, 2.0, 0.5, True)
    assert _Scalars.parse({"limit_s": None}, "echo").limit_s is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ncu_timeout_s", True),
        ("ncu_timeout_s", "30"),
        ("ncu_keep_report", "yes"),
        ("ncu_keep_report", 1),
        ("ncu_check_metrics", "False"),
        ("ncu_check_metrics", 0),
    ],
)
def test_ncu_refuses_a_bool_for_a_number_and_a_str_or_int_for_a_bool(key, value):
    with pytest.raises(ConfigTypeError, match=re.escape(f"backend_options[{key!r}] must be ")) as caught:
        NcuOptions.from_mapping({key: value})
    assert f"got {type(value).__name__} {value!r} (the ncu backend)" in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"ncu_extra_args": {"--launch-skip", "2"}},  # a set: ncu would get its arguments in no fixed order
        {"ncu_sections": ("s" for s in ["SpeedOfLight"])},
        {"ncu_sections": None},
        {"ncu_sections": [b"SpeedOfLight"]},
        {"ncu_set": b"full"},
        {"ncu_path": b"/usr/local/cuda/bin/ncu"},
    ],
)
def test_ncu_refuses_unordered_lists_and_bytes_for_str(options):
    with pytest.raises(NsightxError, match=re.escape(f"backend_options[{next(iter(options))!r}]")):
        NcuOptions.from_mapping(options)


def test_the_values_the_docs_use_are_accepted():
    opts = NcuOptions.from_mapping(
        {
            "ncu_set": "full",
            "ncu_sections": ["SpeedOfLight", "MemoryWorkloadAnalysis"],
            "ncu_extra_args": ("--launch-skip", "2"),
            "ncu_path": "/usr/local/cuda/bin/ncu",
            "ncu_keep_report": True,
            "ncu_timeout_s": 1,
            "ncu_check_metrics": False,
            "ncu_nvtx_ranges": "push_pop",
        }
    )
    assert opts.ncu_timeout_s == 1.0 and opts.ncu_sections == ("SpeedOfLight", "MemoryWorkloadAnalysis")
    assert NcuOptions.from_mapping({"ncu_timeout_s": 2.5}).ncu_timeout_s == 2.5


def test_a_bool_timeout_fails_before_the_function_runs(plugin_host, monkeypatch, tmp_path):
    """Through the decorator, on the ncu backend (the fake ncu binary): nothing is run, not even the warm-up."""
    pytest.importorskip("cloudpickle")
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    calls = []

    @nsightx.analyze.kernel(
        configs=[(1,)], runs=1, backend="ncu", verbosity=0, thermal_mode="off", backend_options={"ncu_timeout_s": True}
    )
    def work(n):
        calls.append(n)
        with nsightx.annotate("a"):
            pass

    with pytest.raises(ConfigTypeError, match=re.escape("backend_options['ncu_timeout_s'] must be a number")):
        work()
    assert calls == []
