"""A bad ``analyze.kernel`` option reads cleanly: our error, raised outside pydantic, for the first bad option.

pydantic collects only ValueError from a validator; a TypeError (our ConfigTypeError) used to escape through its
frames at once, so the user's traceback showed pydantic's ``model_validate`` and, with two bad options, a later
type error was reported before an earlier value error. A value error kept the pydantic ``ValidationError`` as its
(hidden) ``__context__``.
"""

from __future__ import annotations

import itertools
import traceback
from typing import Any

import pytest
from pydantic import ValidationError

import nsightx
from nsightx import ConfigError, ConfigTypeError
from nsightx._spec.options import ProfileSpec

TYPE_CASES: list[dict[str, Any]] = [
    {"runs": 1.5},
    {"runs": "often"},
    {"runs": "auto", "min_runs": "5"},
    {"runs": "auto", "time_budget_s": "1s"},
    {"warmup": "1"},
    {"metrics": "x"},
    {"metrics": [1]},
    {"counters": "dram__bytes.sum"},
    {"counter_runs": 1.5},
    {"derive_metric": 1},
    {"normalize_against": 3},
    {"ignore_kernel_list": "k"},
    {"combine_kernel_metrics": 5},
    {"thermal_wait": "10"},
    {"thermal_cont": 1.5},
    {"thermal_timeout": "60"},
    {"thermal_device": "0"},
    {"output_prefix": 3},
    {"output_csv": "yes"},
    {"info_collectors": 3},
    {"backend": 3},
    {"device": 1.0},
    {"parallel_devices": "some"},
    {"executor": "dask"},
    {"backend_options": [("a", 1)]},
    {"backend_options": {1: 2}},
]
"""Every option that can have a wrong type, each raising ConfigTypeError."""

VALUE_CASES: list[dict[str, Any]] = [
    {"runs": 0},
    {"warmup": -1},
    {"metrics": []},
    {"verbosity": "loud"},
    {"combine_kernel_metrics": lambda a: a},
    {"cache_control": "some"},
    {"clock_control": "boost"},
    {"replay_mode": "graph"},
    {"thermal_mode": "hot"},
    {"thermal_timeout": 0},
    {"thermal_device": -2},
    {"output_prefix": ""},
    {"device": -1},
    {"parallel_devices": [0, 0]},
    {"thermal_wait": 30, "thermal_cont": 20},
]
"""Options with a value out of range (or, the last, two options that conflict), each raising ConfigError."""


def _raised(options: dict[str, Any]) -> Exception:
    with pytest.raises(nsightx.NsightxError) as info:
        nsightx.analyze.kernel(**options)
    return info.value


def _chain(error: BaseException) -> list[BaseException]:
    """``error``'s chained exceptions, shown or hidden (``__cause__`` and ``__context__``, transitively)."""
    seen: list[BaseException] = []
    todo = [error.__cause__, error.__context__]
    while todo:
        e = todo.pop()
        if e is not None and all(e is not s for s in seen):
            seen.append(e)
            todo += [e.__cause__, e.__context__]
    return seen


CASES = [(o, ConfigTypeError) for o in TYPE_CASES] + [(o, ConfigError) for o in VALUE_CASES]


@pytest.mark.parametrize(("options", "kind"), CASES, ids=[f"{i}-{'+'.join(o)}" for i, (o, _) in enumerate(CASES)])
def test_the_traceback_shows_no_pydantic_frame_and_no_chain(options, kind):
    error = _raised(options)
    assert type(error) is kind
    text = "".join(traceback.format_exception(error))
    frames = [f.filename for f in traceback.extract_tb(error.__traceback__)]
    assert not [f for f in frames if "pydantic" in f], text
    assert "pydantic" not in text.lower(), text
    assert "During handling of the above exception" not in text, text
    assert "direct cause of the following exception" not in text, text
    assert not [e for e in _chain(error) if isinstance(e, ValidationError)], text
    assert text.rstrip().endswith(f"{kind.__module__}.{kind.__qualname__}: {error}")


def _single_field_cases() -> list[tuple[int, dict[str, Any]]]:
    """One bad value per field, with the field's declaration index (cases needing a second option left out)."""
    order = list(ProfileSpec.model_fields)
    chosen: dict[str, dict[str, Any]] = {}
    for case in TYPE_CASES + VALUE_CASES:
        if len(case) == 1:
            chosen.setdefault(next(iter(case)), case)
    return sorted((order.index(name), case) for name, case in chosen.items())


def test_every_field_of_the_table_is_a_field():
    names = {name for _, case in _single_field_cases() for name in case}
    assert names <= set(ProfileSpec.model_fields)
    assert len(names) >= 20


def test_of_two_bad_options_the_earlier_declared_is_reported_whatever_the_keyword_order():
    """For every pair of bad options, the error is the one the earlier-declared option raises alone."""
    cases = _single_field_cases()
    alone = {i: _raised(case) for i, case in cases}
    wrong = []
    for (i, first), (_, second) in itertools.combinations(cases, 2):
        for options in ({**first, **second}, {**second, **first}):
            error = _raised(options)
            if (type(error), str(error)) != (type(alone[i]), str(alone[i])):
                wrong.append(f"{options}: got {type(error).__name__}({error}), expected {alone[i]}")
    assert not wrong, "\n".join(wrong[:10]) + f"\n... {len(wrong)} pairs in all"


def test_a_type_error_declared_later_does_not_hide_an_earlier_value_error():
    with pytest.raises(ConfigError, match="invalid thermal_mode 'hot'"):
        nsightx.analyze.kernel(info_collectors=3, thermal_mode="hot")
    with pytest.raises(ConfigError, match="warmup must be >= 0"):
        nsightx.analyze.kernel(output_csv="yes", warmup=-1)


def test_a_type_error_is_still_a_type_error_and_a_value_error_a_value_error():
    assert isinstance(_raised({"output_csv": "yes"}), TypeError)
    assert not isinstance(_raised({"output_csv": "yes"}), ValueError)
    assert isinstance(_raised({"warmup": -1}), ValueError)
