"""Dropped CUPTI records must fail the run (GPU only; kept apart because it starves CUPTI of buffers)."""

from __future__ import annotations

from typing import Any

import pytest

from nsightx._errors import MeasurementError
from nsightx._plan import Plan
from nsightx._runloop import run_loop
from nsightx._sink import RunSink

pytestmark = pytest.mark.gpu


def test_dropped_records_raise_measurement_error() -> None:
    import torch
    from nsightx_cupti._session import open_session
    from nsightx_cupti._tracer import ActivityTracer

    x = torch.ones(1024, device="cuda")
    tracer_box: dict[str, Any] = {}

    def launches() -> None:
        import nsightx

        if tracer_box.get("starve"):
            ActivityTracer.get().buffer_bytes = 0  # CUPTI gets no buffer: it must drop and count
        with nsightx.annotate("many"):
            for _ in range(2000):
                x.add_(1)

    plan = Plan(function=launches, function_name="launches", params=(), configs=((),), runs=1, warmup=0,
                metrics=("gpu__time_duration.sum",), backend="cupti", cache_control="none")
    with open_session(plan) as session:
        run_loop(plan, session, RunSink())  # a normal run works
        tracer_box["starve"] = True
        with pytest.raises(MeasurementError, match="dropped"):
            run_loop(plan, session, RunSink())
