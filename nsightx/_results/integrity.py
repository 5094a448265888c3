"""Checks that a loaded result is consistent and says how complete it is.

pydantic checks the type of each field as a file is read; what no field type can say is how the parts of a
result refer to each other. A value's config must index ``plan.configs`` (a negative index would silently name
another config, one past the end fails later with a bare ``IndexError``), each run and each entry is stored once
(a duplicated one counts twice in ``NumRuns``), a value belongs to a run the result holds, a record to the run
that holds it, and no config has more runs than planned.

A result may hold a million records (``98c9cf0:benchmarks/load_large.py``), so the checks run as set and list
operations over all entries at once, in C; only when one fails is the result walked again, entry by entry, to
name the first bad one by its JSON path (``values[12].config``). :func:`check_run` checks a single run, for the
raw reader, which names the line instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, groupby, repeat
from operator import attrgetter, eq, itemgetter
from typing import Any, NamedTuple

from nsightx._errors import ResultSchemaError
from nsightx._results.records import RunRecords
from nsightx._results.schema import PlanInfo, ResultData

_CONFIG = attrgetter("config")
_CONFIG_RUN = attrgetter("config", "run")
_NEGATIVE = (0).__gt__
_COLLECTORS = attrgetter("collectors")
_RECORD_ID = attrgetter("config", "run", "annotation", "kernel", "metric", "seq")
_REGION_ID = attrgetter("config", "run", "annotation")
_RECORD_KEY = attrgetter("annotation", "kernel", "metric", "seq")
_ANNOTATION = attrgetter("annotation")
_ANNOTATION_METRIC = attrgetter("annotation", "metric")
_VALUE_ID = attrgetter("annotation", "config", "run", "metric")

ONCE = (-1, -1)
"""Config and run of the entry that holds a call's ONCE-scope collector values."""


class Completeness(NamedTuple):
    """How many of the planned runs a result holds (``ProfileResults.completeness``)."""

    held: int
    """Measured runs held (the ONCE-collector entry not counted)."""
    planned: int
    """Runs the plan asked for: configs x runs (under ``runs="auto"`` the most it allowed)."""
    configs: int
    """Configs in the plan."""
    configs_held: int
    """Configs with at least one run."""
    adaptive: bool
    """``runs="auto"``: each config stopped on its own, so only a config without runs shows a missing part."""

    @property
    def complete(self) -> bool:
        """Whether every planned run is there (under ``runs="auto"``: every config has runs)."""
        return self.configs_held == self.configs if self.adaptive else self.held >= self.planned

    def describe(self) -> str:
        """``holds 4 of 6 planned runs (2 configs x 3 runs)`` (``runs="auto"``: configs with runs of all)."""
        if self.adaptive:
            return (
                f'holds runs of {self.configs_held} of {self.configs} planned configs (runs="auto", '
                f"{self.held} runs in all, at most {self.planned} planned)"
            )
        runs = self.planned // self.configs if self.configs else 0
        return f"holds {self.held} of {self.planned} planned runs ({self.configs} configs x {runs} runs)"


def completeness(plan: PlanInfo, runs: Iterable[RunRecords]) -> Completeness:
    """Count the measured runs and configs of ``runs`` against ``plan`` (runs are assumed checked: no duplicate).

    Only integers are collected (no tuple per run): right after a large result was built with the garbage
    collector paused, allocating containers would start a collection that walks the whole result.
    """
    configs = list(map(_CONFIG, runs))
    once = sum(map(_NEGATIVE, configs))
    held_configs = len(set(configs)) - (1 if once else 0)
    n = len(plan.configs)
    return Completeness(len(configs) - once, n * plan.runs, n, held_configs, plan.adaptive)


def refuse(source: str, problem: str) -> ResultSchemaError:
    """The error for ``problem`` in the file ``source`` (a quoted path)."""
    return ResultSchemaError(f"{source}: {problem}")


def check_plan(plan: PlanInfo, source: str, where: str = "plan") -> None:
    """Refuse a plan that cannot describe a measurement.

    That is: no run per config, a parameter or metric named twice, a config whose values do not match the parameters.

    Raises:
        ResultSchemaError: naming ``<where>.runs``, ``<where>.params``, ``<where>.metrics`` or ``<where>.configs[i]``.
    """
    if plan.runs < 1:
        raise refuse(source, f"{where}.runs is {plan.runs}; expected the number of runs per config, at least 1")
    for field in ("params", "metrics"):
        names = getattr(plan, field)
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise refuse(source, f"{where}.{field} names {twice[0]!r} twice; expected each name once, as measured")
    width = len(plan.params)
    for i, config in enumerate(plan.configs):
        if len(config) != width:
            raise refuse(
                source,
                f"{where}.configs[{i}] has {len(config)} value(s); expected {width}, one per parameter of "
                f"{where}.params {list(plan.params)}",
            )


def _index_problem(config: int, run: int, plan: PlanInfo, what: str) -> str | None:
    """Why (config, run) cannot be a measured run of ``plan``, or ``None``."""
    n = len(plan.configs)
    if not 0 <= config < n:
        return f"{what}.config is {config}; expected a config index from 0 to {n - 1} (plan.configs has {n})"
    if not 0 <= run < plan.runs:
        return f"{what}.run is {run}; expected a run index from 0 to {plan.runs - 1} (plan.runs is {plan.runs})"
    return None


def check_run(run: RunRecords, plan: PlanInfo, what: str) -> str | None:
    """Why one run does not fit ``plan`` or does not hold its own entries once each, or ``None``.

    Args:
        run: The run.
        plan: The plan it was measured under.
        what: How the message names the run (``runs[4]``, ``line 5``).
    """
    if (run.config, run.run) == ONCE:
        if run.records or run.regions:
            return f"{what} is config -1 run -1 (the call's ONCE collector values) but holds records or regions"
        return None
    if run.config < 0:
        return (
            f"{what}.config is {run.config}; expected a config index from 0 to {len(plan.configs) - 1}, or -1 "
            "with run -1 for the call's ONCE collector values"
        )
    problem = _index_problem(run.config, run.run, plan, what)
    if problem is not None:
        return problem
    key = (run.config, run.run)
    for field, ident in (("records", _RECORD_ID), ("regions", _REGION_ID)):
        entries = getattr(run, field)
        if all(map(eq, map(_CONFIG_RUN, entries), repeat(key))) and len(set(map(ident, entries))) == len(entries):
            continue  # the common case, in C; the loop below names the first bad entry
        seen: dict[tuple[Any, ...], int] = {}
        for j, entry in enumerate(entries):
            if _CONFIG_RUN(entry) != (run.config, run.run):
                return (
                    f"{what}.{field}[{j}] is config {entry.config} run {entry.run}, but {what} is config "
                    f"{run.config} run {run.run}; an entry belongs to the run that holds it"
                )
            first = seen.setdefault(ident(entry), j)
            if first != j:
                return f"{what}.{field}[{first}] and {what}.{field}[{j}] are the same entry; each is stored once"
    return None


def check_result(data: ResultData, source: str) -> None:
    """Refuse a result whose parts do not fit together (see the module docstring for what is checked).

    Raises:
        ResultSchemaError: naming ``source``, the first bad entry by its JSON path, and what was expected.
    """
    plan = data.plan
    check_plan(plan, source)
    n = len(plan.configs)
    for name in ("config_devices", "config_hosts"):
        got = len(getattr(data, name))
        if got not in (0, n):
            raise refuse(source, f"{name} has {got} entries; expected none or {n}, one per config of plan.configs")
    runs = data.runs
    keys = list(map(_CONFIG_RUN, runs))
    held = _check_run_keys(runs, keys, plan, source)
    for field, ident in (("records", _RECORD_KEY), ("regions", _ANNOTATION)):
        per_run = list(map(attrgetter(field), runs))
        # Lazily, entry by entry: no list of a million tuples, and small per-run sets stay in the CPU's cache.
        owners = chain.from_iterable(map(repeat, keys, map(len, per_run)))
        own = all(map(eq, map(_CONFIG_RUN, chain.from_iterable(per_run)), owners))
        if not own or not all(len(set(map(ident, entries))) == len(entries) for entries in per_run):
            _locate_in_runs(runs, plan, source)
    _check_collectors(runs, plan, source)
    _check_values(data, held, source)


def _check_run_keys(
    runs: Sequence[RunRecords], keys: list[tuple[int, int]], plan: PlanInfo, source: str
) -> set[tuple[int, int]]:
    """Each run's (config, run) in range and stored once; returns the measured ones."""
    measured = [k for k in keys if k[0] >= 0]
    held = set(measured)
    others = [i for i, k in enumerate(keys) if k[0] < 0]
    fine = len(held) == len(measured) and all(
        keys[i] == ONCE and not runs[i].records and not runs[i].regions for i in others
    )
    if fine and measured:
        configs, run_ids = list(map(itemgetter(0), measured)), list(map(itemgetter(1), measured))
        fine = max(configs) < len(plan.configs) and min(run_ids) >= 0 and max(run_ids) < plan.runs
    if fine:
        return held
    first: dict[tuple[int, int], int] = {}
    for i, (c, r) in enumerate(keys):
        problem = check_run(runs[i], plan, f"runs[{i}]") if c < 0 or _index_problem(c, r, plan, "") else None
        if problem is not None:
            raise refuse(source, problem)
        j = first.setdefault((c, r), i)
        if c >= 0 and j != i:
            raise refuse(
                source,
                f"runs[{j}] and runs[{i}] are both config {c} run {r}; each run is stored once (a duplicated "
                "run would count twice)",
            )
    return held


def _locate_in_runs(runs: Sequence[RunRecords], plan: PlanInfo, source: str) -> None:
    """Raise for the first run whose records or regions are not its own or not unique (the slow path)."""
    for i, run in enumerate(runs):
        problem = check_run(run, plan, f"runs[{i}]")
        if problem is not None:
            raise refuse(source, problem)
    raise refuse(source, "the records or regions of runs do not fit their runs")  # not reached: the walk names it


def _check_collectors(runs: Sequence[RunRecords], plan: PlanInfo, source: str) -> None:
    """Collector values name a config and a run in range, or none."""
    values = list(chain.from_iterable(map(_COLLECTORS, runs)))
    if not values:
        return
    configs = set(map(attrgetter("config"), values))
    run_ids = set(map(attrgetter("run"), values))
    configs.discard(None)
    run_ids.discard(None)
    if configs <= set(range(len(plan.configs))) and run_ids <= set(range(plan.runs)):
        return
    for i, run in enumerate(runs):
        for j, cv in enumerate(run.collectors):
            if cv.config is not None and not 0 <= cv.config < len(plan.configs):
                raise refuse(
                    source,
                    f"runs[{i}].collectors[{j}].config is {cv.config}; expected a config index from 0 to "
                    f"{len(plan.configs) - 1} (or null)",
                )
            if cv.run is not None and not 0 <= cv.run < plan.runs:
                raise refuse(
                    source,
                    f"runs[{i}].collectors[{j}].run is {cv.run}; expected a run index from 0 to {plan.runs - 1} "
                    "(or null)",
                )


def _check_values(data: ResultData, held: set[tuple[int, int]], source: str) -> None:
    """Each value belongs to a run the result holds and is stored once.

    nsightx writes the values of one run next to each other, runs in order: then each run's block is checked
    with a small set. Values in another order take the slow path, which is exact too.
    """
    blocks: set[tuple[int, int]] = set()
    for key, group in groupby(data.values, key=_CONFIG_RUN):
        block = list(group)
        if key in blocks or key not in held or len(set(map(_ANNOTATION_METRIC, block))) != len(block):
            break
        blocks.add(key)
    else:
        return
    seen: dict[tuple[str, int, int, str], int] = {}
    for i, v in enumerate(data.values):
        problem = _index_problem(v.config, v.run, data.plan, f"values[{i}]")
        if problem is not None:
            raise refuse(source, problem)
        if (v.config, v.run) not in held:
            raise refuse(
                source,
                f"values[{i}] is config {v.config} run {v.run}, but runs holds no such run; a value belongs to a "
                "measured run",
            )
        first = seen.setdefault(_VALUE_ID(v), i)
        if first != i:
            raise refuse(
                source,
                f"values[{first}] and values[{i}] are both annotation {v.annotation!r}, config {v.config}, run "
                f"{v.run}, metric {v.metric!r}; each value is stored once (a duplicate would count the run twice "
                "in NumRuns)",
            )
