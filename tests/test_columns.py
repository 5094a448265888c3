"""The measured-condition column names are defined once, in the public nsightx.columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsightx import columns

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", columns.MEASURED_CONDITIONS)
def test_each_name_is_a_literal_only_in_nsightx_columns(name):
    holders = [
        str(p.relative_to(ROOT))
        for folder in ("nsightx", "backends", "plugins")
        for p in (ROOT / folder).rglob("*.py")
        if f'"{name}"' in p.read_text(encoding="utf-8") or f"'{name}'" in p.read_text(encoding="utf-8")
    ]
    assert holders == ["nsightx/columns.py"]


def test_the_nvml_plugin_and_the_core_use_the_same_names():
    from nsightx_ncu import _report
    from nsightx_nvml import _collectors

    from nsightx._results import dataframe as _dataframe

    assert _collectors.READ_COLUMNS == columns.MEASURED_CONDITIONS
    assert _dataframe.MEASURED_SM_CLOCK == _report.MEASURED_SM_CLOCK_COLUMN == columns.MEASURED_SM_CLOCK
    assert _dataframe.CLOCK_EVENT_REASONS == columns.CLOCK_EVENT_REASONS
