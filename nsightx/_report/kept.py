"""What the pytest plugin saves after re-measures: for each config, the measurement its verdict was made on.

A test's row that looks regressed is measured again (its configs only, :func:`nsightx._report.pytest_gate.confirm`).
When every regressed row of a config clears, the verdict on that config is the re-measure that cleared the last of
them, and the first measurement was the slow moment of the machine that the re-measure exists to set aside. Saved
as the baseline, that slow moment would be the next comparison's reference (hiding a real slowdown of the same
size) and widen the noise floor learned from the saves. So the saved result holds that re-measure's runs and
values for such a config, and the first measurement's for every other config (a confirmed slowdown is the first
measurement, the one its table shows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nsightx._remote.taskruns import run_as
from nsightx._results.profileresults import ProfileResults
from nsightx._results.records import RunRecords

Taken = Mapping[int, tuple[ProfileResults, Sequence[int]]]
"""Config index of the first measurement -> (the re-measure whose runs it keeps, the configs that re-measure
measured, as indices of the first measurement's configs)."""


def kept_result(first: ProfileResults, taken: Taken) -> ProfileResults:
    """``first`` with the runs and values of each config in ``taken`` replaced by those of its re-measure.

    Everything else (plan, environment, creation time, the other configs) is the first measurement's. A
    ``once``-scope collector value of a replaced run (the call's, not the config's) is kept from the first.

    Args:
        first: The test's measurement.
        taken: Which configs come from which re-measure (:data:`Taken`); empty: ``first`` itself.

    Returns:
        The result to save.
    """
    if not taken:
        return first
    data = first.data
    runs = [r for r in data.runs if r.config not in taken]
    values = [v for v in data.values if v.config not in taken]
    once = [c for r in data.runs if r.config in taken for c in r.collectors if c.scope == "once"]
    for config, (again, measured) in sorted(taken.items()):
        own = list(measured).index(config)  # the config's index in the re-measure's plan
        runs += [_renumbered(r, config) for r in again.data.runs if r.config == own]
        values += [v.model_copy(update={"config": config}) for v in again.data.values if v.config == own]
    runs.sort(key=lambda r: (r.config, r.run))
    values.sort(key=lambda v: (v.config, v.run))
    if once and runs:
        runs[0] = runs[0].model_copy(update={"collectors": (*once, *runs[0].collectors)})
    return ProfileResults(data.model_copy(update={"runs": tuple(runs), "values": tuple(values)}))


def _renumbered(run: RunRecords, config: int) -> RunRecords:
    """A re-measure's run as a run of ``config``, without its ``once`` values (the first measurement's are kept)."""
    run = run_as(run, config)
    return run.model_copy(update={"collectors": tuple(c for c in run.collectors if c.scope != "once")})
