"""Build real ``ResultData`` objects from given per-run values (for plot and compare tests).

Only the measurement is replaced: the result goes through the same schema, aggregation and save/load code as
one produced by a backend.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo, ResultData
from nsightx._results.transform import RunValue

CUPTI_FIXTURES = Path(__file__).parent / "fixtures" / "cupti"
HOST_METRIC = "host__time_duration.sum"


def host_plan(configs: Sequence[tuple[Any, ...]], runs: int, **extra: Any) -> PlanInfo:
    """The plan of a host-backend call of ``configs`` (one parameter ``n``), ``runs`` runs, no warm-up."""
    return PlanInfo(
        function="f",
        params=("n",),
        configs=tuple(configs),
        runs=runs,
        warmup=0,
        metrics=(HOST_METRIC,),
        backend="host",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
        **extra,
    )


def host_result(runs: Sequence[RunRecords], configs: Sequence[tuple[Any, ...]], per_config: int) -> ProfileResults:
    """The result ``build_results`` makes of ``runs`` (as the host backend writes them) under :func:`host_plan`."""
    plan = host_plan(configs, per_config)
    return build_results(plan, list(runs), {"GPU": "none"}, created="2026-12-05T00:00:00+00:00")


def make_result(
    values: Mapping[tuple[str, int, str], Sequence[float]],
    *,
    params: Sequence[str],
    configs: Sequence[tuple[Any, ...]],
    function: str = "bench",
    units: Mapping[str, str] | None = None,
    backend: str = "cupti",
    gpu: str = "synthetic GPU",
    created: str = "2026-12-02T12:00:00+00:00",
) -> ProfileResults:
    """A result whose run ``i`` of (annotation, config index, metric) has value ``values[key][i]``."""
    units = units or {}
    vals: list[RunValue] = []
    by_run: dict[tuple[int, int], list[Record]] = {}
    metrics: list[str] = []
    for (ann, cfg, metric), series in values.items():
        if metric not in metrics:
            metrics.append(metric)
        for run, v in enumerate(series):
            unit = units.get(metric, "ns")
            vals.append(
                RunValue(annotation=ann, config=cfg, run=run, metric=metric, value=float(v), unit=unit, kernel="kernel")
            )
            by_run.setdefault((cfg, run), []).append(
                Record(annotation=ann, config=cfg, run=run, kernel="kernel", metric=metric, value=float(v), unit=unit)
            )
    runs = tuple(RunRecords(config=c, run=r, records=tuple(recs)) for (c, r), recs in sorted(by_run.items()))
    data = ResultData(
        nsightx_version="0.1.0",
        created=created,
        plan=PlanInfo(
            function=function,
            params=tuple(params),
            configs=tuple(tuple(c) for c in configs),
            runs=max(len(s) for s in values.values()),
            warmup=1,
            metrics=tuple(metrics),
            backend=backend,
            cache_control="none",
            clock_control="none",
            replay_mode="kernel",
        ),
        environment={"GPU": gpu, "Host": "testhost"},
        runs=runs,
        values=tuple(vals),
    )
    return ProfileResults(data)


def noisy(mean: float, rsd: float, n: int, seed: int) -> list[float]:
    """``n`` values around ``mean`` with relative standard deviation ``rsd`` (reproducible)."""
    rng = random.Random(seed)
    return [mean * (1.0 + rng.gauss(0.0, rsd)) for _ in range(n)]


def cupti_fixture_runs(
    name: str = "splitk_512", runs: int = 5, collectors: Callable[[int], tuple[CollectorValue, ...]] | None = None
) -> list[RunRecords]:
    """A CUPTI batch recorded on the H200 (``tests/fixtures/cupti/<name>.json``), attributed by the backend's own
    code and repeated as ``runs`` measured runs of config 0 (with ``collectors(run)`` values when given)."""
    from nsightx_cupti._attribution import attribute, batch_from_json, to_run_output

    batch, windows, _ = batch_from_json((CUPTI_FIXTURES / f"{name}.json").read_text())
    out = to_run_output(attribute(batch, windows), windows)
    return [
        RunRecords(
            config=0,
            run=r,
            records=tuple(rec.model_copy(update={"run": r}) for rec in out.records),
            regions=tuple(
                RegionRun(
                    annotation=w.annotation,
                    config=0,
                    run=r,
                    host_ns=w.exit_ns - w.enter_ns,
                    attributes=out.region_attributes[w.annotation],
                )
                for w in windows
            ),
            collectors=collectors(r) if collectors else (),
        )
        for r in range(runs)
    ]
