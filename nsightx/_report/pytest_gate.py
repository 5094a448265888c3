"""The session side of the pytest plugin: where each test's result is stored, how it is compared, the verdict.

Knows nothing of pytest (``nsightx.pytest_plugin`` holds the hooks and the fixture), so it can be read and tested
as plain Python. It imports only the standard library and ``nsightx._errors`` at module level: pytest imports the
plugin at every start, and the plugin must cost nothing unless used. The comparison is :func:`nsightx.compare`
itself, the one ``nsightx compare`` runs, with the same gate (:func:`nsightx._report.compare.gate_failed`) and the same
tables.

The gate never passes on nothing: a test whose result could not be compared with its baseline (no annotation,
config or metric in both), an unreadable baseline, or a session in which no test was compared at all fails it.
A test without a stored baseline is listed; it fails the gate only with ``require_all``.

Baselines keep their history (:mod:`nsightx._report.history`): each save is a new file, the newest (or the one
``--nsightx-baseline`` names) is compared with, and the saves before it give the noise floor. A row that looks
regressed is measured again in the same process (``--nsightx-confirm`` times, only its configs) and fails the gate
only if every re-measure is still a regression: a one-off slow stretch of the machine clears, a real slowdown
does not.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nsightx._errors import CompareError, ConfigError, NsightxError
from nsightx._report import history as _history

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.profileresults import ProfileResults

DEFAULT_THRESHOLD_PCT = 5.0
"""The default of ``--nsightx-threshold`` (the same as ``nsightx compare --threshold``)."""

DEFAULT_CONFIRM = 2
"""The default of ``--nsightx-confirm``: how many times a row that looks regressed is measured again."""


def result_filename(nodeid: str) -> str:
    """The file name a test's result had before baselines kept history (now read as its save number 0).

    ``tests/test_mm.py::test_mm[1024-fp32]`` becomes ``tests_test_mm.py_test_mm_1024-fp32-<10 hex>.json``; the
    test's saves now live in the folder of the same name without ``.json``
    (:func:`nsightx._report.history.test_folder`).
    """
    return _history.test_folder(nodeid) + ".json"


Remeasure = Callable[[Sequence[int]], "ProfileResults"]
"""Measures the test's function again over the given config indices (the fixture's :meth:`Bench.remeasure`)."""


@dataclass(frozen=True)
class GateSettings:
    """What the command line asked of the plugin."""

    backend: str = "auto"
    """``--nsightx-backend``: the backend of every ``nsightx_bench`` call that names none."""
    save_dir: Path | None = None
    """``--nsightx-save``: where each test's result is written."""
    compare_dir: Path | None = None
    """``--nsightx-compare``: where each test's baseline is read."""
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    """``--nsightx-threshold``: the smallest significant slowdown, in percent, that fails the session."""
    require_all: bool = False
    """``--nsightx-require-all``: a test without a baseline, a baseline no test measured, or a row only one side
    has fails the session."""
    markdown: Path | None = None
    """``--nsightx-markdown``: a file the comparison is appended to as Markdown (e.g. ``$GITHUB_STEP_SUMMARY``)."""
    baseline_ref: str | None = None
    """``--nsightx-baseline``: which save of each test to compare with (a save number or a commit prefix)."""
    confirm: int = DEFAULT_CONFIRM
    """``--nsightx-confirm``: re-measures of a row that looks regressed before it fails the gate (0: none)."""

    @property
    def active(self) -> bool:
        """Whether anything is saved or compared (else the plugin prints nothing)."""
        return self.save_dir is not None or self.compare_dir is not None


Status = Literal["compared", "no baseline", "nothing compared", "bad baseline", "not recorded"]
"""What became of one test's result (``not recorded``: the test did not pass, so its timing is neither saved nor
compared)."""


@dataclass
class Outcome:
    """One test's result against its baseline."""

    nodeid: str
    status: Status
    baseline: Path | None = None
    frame: pd.DataFrame | None = None
    """The comparison (``status == "compared"``)."""
    message: str = ""
    """Why it could not be compared, in one line."""

    @property
    def regressed(self) -> bool:
        """Whether the comparison fails the gate (a significant slowdown, or with ``require_all`` a lone row)."""
        from nsightx._report.compare import gate_failed

        return self.frame is not None and gate_failed(self.frame)


@dataclass
class Gate:
    """Collects each test's result, saves it, compares it, and gives the session's verdict."""

    settings: GateSettings
    outcomes: list[Outcome] = field(default_factory=list)
    saved: list[Path] = field(default_factory=list)

    def record(self, nodeid: str, result: ProfileResults, remeasure: Remeasure | None = None) -> None:
        """Compare a passed test's result with its baseline (if comparing), then save it (if saving).

        The baseline is read before the result is saved, so ``--nsightx-save`` and ``--nsightx-compare`` may
        name the same folder. A comparison that fails the gate on a slowdown is confirmed with ``remeasure``
        (see the module docstring) when it is given and ``confirm`` is above 0; what is saved is then the
        measurement the verdict was made on (:func:`confirm`'s result: a config whose slowdown a re-measure
        cleared is saved as that re-measure measured it).

        Raises:
            ConfigError: the result cannot be written.
        """
        verdict_on = result
        if self.settings.compare_dir is not None:
            outcome, baseline = self._compare(nodeid, result)
            if baseline is not None and remeasure is not None and self.settings.confirm > 0:
                verdict_on = confirm(outcome, baseline, result, remeasure, self.settings)
            self.outcomes.append(outcome)
        if self.settings.save_dir is not None:
            self.saved.append(_history.save(self.settings.save_dir, nodeid, verdict_on))

    def not_recorded(self, nodeid: str, why: str) -> None:
        """Note a test whose result is kept out of the gate (it failed or skipped after measuring)."""
        if self.settings.active:
            self.outcomes.append(Outcome(nodeid, "not recorded", message=why))

    def _compare(self, nodeid: str, result: ProfileResults) -> tuple[Outcome, Any]:
        """The test's outcome, and its baseline (a ``Source`` with history) when one was compared."""
        from nsightx._report.compare import compare
        from nsightx._report.sources import stored_source

        assert self.settings.compare_dir is not None
        folder = self.settings.compare_dir / _history.test_folder(nodeid)
        found = _history.entries(folder)
        if not found:
            return Outcome(nodeid, "no baseline", folder, message=f"no stored result in {str(folder)!r}"), None
        try:
            baseline = stored_source(found, self.settings.baseline_ref)
        except ConfigError as e:
            return Outcome(nodeid, "no baseline", folder, message=_one_line(e)), None
        except NsightxError as e:  # an unreadable or foreign baseline file
            return Outcome(nodeid, "bad baseline", folder, message=_one_line(e)), None
        where = baseline.path or folder
        try:
            frame = compare(baseline, result, **_gate_options(self.settings))
        except CompareError as e:
            return Outcome(nodeid, "nothing compared", where, message=_one_line(e)), None
        except NsightxError as e:
            return Outcome(nodeid, "bad baseline", where, message=_one_line(e)), None
        return Outcome(nodeid, "compared", where, frame), baseline

    def unmatched_baselines(self) -> list[Path]:
        """Stored tests in the compare folder that no test of this session measured (renamed, skipped, gone)."""
        folder = self.settings.compare_dir
        if folder is None or not folder.is_dir():
            return []
        measured = {_history.test_folder(o.nodeid) for o in self.outcomes if o.status != "not recorded"}
        return [folder / name for name in _history.scan(folder) if name not in measured]

    def failures(self) -> list[str]:
        """Why the gate fails, one reason per kind (empty: it passes, or nothing is compared)."""
        if self.settings.compare_dir is None:
            return []
        by = _by_status(self.outcomes)
        reasons = []
        slow = [o for o in by["compared"] if o.frame is not None and bool(o.frame["Regression"].any())]
        if slow:
            reasons.append(f"{len(slow)} test(s) with a significant slowdown larger than {self._threshold()}")
        lone = [o for o in by["compared"] if o.regressed and o not in slow]
        if lone:
            reasons.append(f"{len(lone)} test(s) with a config or metric only one side has (--nsightx-require-all)")
        broken = by["nothing compared"] + by["bad baseline"]
        if broken:
            reasons.append(f"{len(broken)} test(s) whose result could not be compared with the baseline")
        if self.settings.require_all:
            if by["no baseline"]:
                reasons.append(f"{len(by['no baseline'])} test(s) without a baseline (--nsightx-require-all)")
            unmatched = self.unmatched_baselines()
            if unmatched:
                reasons.append(f"{len(unmatched)} baseline(s) no test measured (--nsightx-require-all)")
        if not by["compared"]:
            reasons.append(self._nothing_compared(by))
        return reasons

    def _threshold(self) -> str:
        return f"{self.settings.threshold_pct:g}%"

    def _nothing_compared(self, by: dict[str, list[Outcome]]) -> str:
        measured = sum(len(v) for k, v in by.items() if k != "not recorded")
        if not measured:
            return (
                "nothing was compared: no test recorded a result with the nsightx_bench fixture (all skipped, "
                "failed or deselected?)"
            )
        return f"nothing was compared: none of the {measured} measured test(s) could be compared with a baseline"

    def verdict(self) -> str:
        """The one line that closes the summary."""
        if self.settings.compare_dir is None:
            return f"nsightx: saved {len(self.saved)} result(s) to {str(self.settings.save_dir)!r}"
        failures = self.failures()
        if failures:
            return "nsightx: FAIL: " + "; ".join(failures)
        compared = len(_by_status(self.outcomes)["compared"])
        return f"nsightx: ok: {compared} test(s) compared, no significant slowdown larger than {self._threshold()}"

    def report_lines(self, *, verbose: bool = False, width: int | None = None) -> list[str]:
        """The terminal summary, one entry per test, then the baselines no test measured.

        A test that fails the gate gets its whole table (with ``verbose``, every compared test does); the others
        get one line: the compare verdict, or why there is nothing to compare. Tables fit ``width`` columns.
        """
        from nsightx._report.views import render_text, summary

        lines: list[str] = []
        for o in self.outcomes:
            if o.frame is not None and (verbose or o.regressed):
                lines += [f"{o.nodeid}  (baseline {str(o.baseline)!r})", render_text(o.frame, width), ""]
            elif o.frame is not None:
                lines.append(f"{o.nodeid}: {summary(o.frame)}")
            else:
                lines.append(f"{o.nodeid}: {o.status.upper()}: {o.message}")
        unmatched = self.unmatched_baselines()
        if unmatched:
            shown = ", ".join(p.name for p in unmatched[:5])
            shown += f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else ""
            where = str(self.settings.compare_dir)
            lines.append(f"{len(unmatched)} baseline(s) in {where!r} that no test measured: {shown}")
        if self.settings.save_dir is not None and self.settings.compare_dir is not None:
            lines.append(f"saved {len(self.saved)} result(s) to {str(self.settings.save_dir)!r}")
        return lines

    def markdown(self) -> str:
        """The comparison as Markdown: the verdict, then each test's table or why it has none."""
        from nsightx._report.views import render_markdown

        parts = [f"## {self.verdict()}", ""]
        for o in self.outcomes:
            parts.append(f"#### {code_span(o.nodeid)}")
            parts += [render_markdown(o.frame) if o.frame is not None else f"{o.status}: {o.message}", ""]
        return "\n".join(parts) + "\n"


def code_span(text: str) -> str:
    """``text`` as one Markdown code span: fenced by more backticks than it holds in a row (CommonMark).

    A node id may hold a backtick (``test_x[a`b]``: pytest keeps printable characters of an id); in a single-tick
    span it ended the span there and the rest was read as Markdown.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{' '.join(text.splitlines())}{pad}{fence}"


def _by_status(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    by: dict[str, list[Outcome]] = {
        s: [] for s in ("compared", "no baseline", "nothing compared", "bad baseline", "not recorded")
    }
    for o in outcomes:
        by[o.status].append(o)
    return by


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _gate_options(settings: GateSettings) -> dict[str, Any]:
    return {"threshold_pct": settings.threshold_pct, "require_all": settings.require_all}


def confirm(
    outcome: Outcome, baseline: Any, result: ProfileResults, remeasure: Remeasure, settings: GateSettings
) -> ProfileResults:
    """Measure the regressed rows' configs again, up to ``settings.confirm`` times; clear the rows that recover.

    A row stays a regression only if every re-measure, compared with the same baseline by the same rule, is a
    regression too; the first re-measure in which it is not clears it (its ``Regression`` becomes false). The
    ``Remeasured`` column says what each re-measure gave. A re-measure that raises leaves the verdict as it was
    and says why.

    Returns:
        The measurement the verdict was made on, to save (:func:`nsightx._report.kept.kept_result`): ``result``,
        except that a config whose every regressed row cleared holds the re-measure that cleared the last one.
    """
    from nsightx._report.compare import compare
    from nsightx._report.kept import kept_result

    frame = outcome.frame
    if frame is None or not bool(frame["Regression"].any()):
        return result
    params = [c for c in frame.columns if c not in _fixed_columns()]
    keys = {i: _row_key(frame.loc[i], params) for i in frame.index[frame["Regression"]]}
    configs = {i: _configs_of(result, [key], params, strict=True) for i, key in keys.items()}
    seen: dict[Any, list[str]] = {i: [] for i in keys}
    taken: dict[int, tuple[ProfileResults, list[int]]] = {}
    frame["Remeasured"] = ""
    for attempt in range(1, settings.confirm + 1):
        indices = _configs_of(result, keys.values(), params)
        try:
            measured = remeasure(indices)
            again = compare(baseline, measured, **_gate_options(settings))
        except Exception as e:  # the function failed when called again: keep the verdict, say why
            for i in keys:
                frame.at[i, "Remeasured"] = f"re-measure failed ({type(e).__name__}: {_one_line(e)[:80]})"
            return kept_result(result, taken)
        _settle(frame, keys, seen, again, params, attempt)
        open_configs = {c for i in keys for c in configs[i]}
        cleared = {c for i in configs for c in configs[i]} - open_configs
        taken.update({c: (measured, indices) for c in cleared if c in indices and c not in taken})
        if not keys:
            return kept_result(result, taken)
    for i in keys:
        frame.at[i, "Remeasured"] = f"confirmed by {settings.confirm} re-measure(s) ({', '.join(seen[i])})"
    return kept_result(result, taken)


def _settle(
    frame: pd.DataFrame,
    keys: dict[Any, str],
    seen: dict[Any, list[str]],
    again: pd.DataFrame,
    params: Sequence[str],
    n: int,
) -> None:
    """Clear the rows ``again`` (re-measure ``n``'s comparison) does not find regressed; drop them from ``keys``."""
    by_key = {_row_key(r, params): r for _, r in again.iterrows()}
    for i, key in list(keys.items()):
        row = by_key.get(key)
        change = f"{row['ChangePct']:+.1f}%" if row is not None and math.isfinite(row["ChangePct"]) else "-"
        seen[i].append(change)
        if row is None or not bool(row["Regression"]):
            frame.at[i, "Regression"] = False
            frame.at[i, "Remeasured"] = f"cleared by re-measure {n} ({change})"
            del keys[i]


def _fixed_columns() -> tuple[str, ...]:
    from nsightx._report.compare import FIXED_COLUMNS

    return FIXED_COLUMNS


def _row_key(row: Any, params: Sequence[str]) -> str:
    """A row's identity across two comparisons: function, annotation, metric and parameter values."""
    values = [row["Function"], row["Annotation"], row["Metric"], *(row[p] for p in params)]
    return json.dumps([_text(v) for v in values])


def _text(value: Any) -> str:
    item = getattr(value, "item", None)
    return str(item() if callable(item) else value)


def _configs_of(result: ProfileResults, keys: Any, params: Sequence[str], *, strict: bool = False) -> list[int]:
    """The indices of ``result``'s configs that the rows ``keys`` (:func:`_row_key`) measured.

    When no config matches, every config (to re-measure: the whole call), or none with ``strict``.
    """
    plan = result.data.plan
    wanted = {tuple(json.loads(k)[3:]) for k in keys}
    out = []
    for i, cfg in enumerate(plan.configs):
        values = dict(zip(plan.params, cfg, strict=False))
        if tuple(_text(values.get(p, math.nan)) for p in params) in wanted:
            out.append(i)
    return out if out or strict else list(range(len(plan.configs)))
