"""Option values in any case: accepted, and stored and shown in their one lower-case form (docs/compat.md).

nsight-python refuses ``cache_control="ALL"``, ``clock_control="BASE"`` and ``replay_mode="KERNEL"`` (its
``ValueError: cache_control must be 'none', or 'all'``), and does not check ``thermal_mode`` at all (``"OFF"`` is
not ``"off"`` there, so its thermal control stays on). nsightx accepts each of them in any case, a deliberate
difference that harms no drop-in user; what it must not do is keep the user's spelling, since the results, the
flags and the files compare these values with their lower-case form (``cache_control == "none"`` makes the
``warm`` flag). So a call with upper-case values must be the same call as the lower-case one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import nsightx
from nsightx import ConfigError
from nsightx._enums import CACHE_CONTROL, CLOCK_CONTROL, REPLAY_MODES, THERMAL_MODES
from nsightx._spec.options import build_spec

VOCABULARY = {
    "cache_control": CACHE_CONTROL,
    "clock_control": CLOCK_CONTROL,
    "replay_mode": REPLAY_MODES,
    "thermal_mode": THERMAL_MODES,
}
CASES = [(option, value) for option, values in VOCABULARY.items() for value in values]


@pytest.mark.parametrize(("option", "value"), CASES)
def test_any_case_is_the_lower_case_value(option: str, value: str) -> None:
    for spelled in (value.upper(), value.capitalize(), value):
        assert getattr(build_spec(**{option: spelled}), option) == value


@pytest.mark.parametrize("option", list(VOCABULARY))
def test_a_value_outside_the_list_is_still_refused_in_any_case(option: str) -> None:
    with pytest.raises(ConfigError, match=option):
        build_spec(**{option: "SOMETIMES"})


def test_an_upper_case_call_records_and_flags_what_the_lower_case_one_does(tmp_path: Path) -> None:
    results = {}
    for label, spelled in (("upper", "NONE"), ("lower", "none")):

        @nsightx.analyze.kernel(
            configs=[(1,), (2,)],
            runs=3,
            backend="host",
            verbosity=nsightx.VerbosityLevel.SILENT,
            cache_control=spelled,
            thermal_mode=spelled.replace("NONE", "OFF").replace("none", "off"),
            output_prefix=str(tmp_path / label) + "/",
        )
        def f(n: int) -> None:
            with nsightx.annotate("a"):
                sum(range(n))

        results[label] = f()
    upper, lower = results["upper"], results["lower"]
    assert upper.data.plan.cache_control == lower.data.plan.cache_control == "none"
    for res in (upper, lower):  # the flag the option sets; the timing flags (short, unstable) differ between calls
        assert all("warm" in flags.split(",") for flags in res.to_dataframe()["Flags"]), "caches not flushed: warm"
    saved = nsightx.load(str(next((tmp_path / "upper").glob("result-*"))))
    assert saved.data.plan.cache_control == "none"
    assert saved.to_dataframe()["Flags"].tolist() == upper.to_dataframe()["Flags"].tolist()
