"""The session side of the pytest plugin: where each test's result is stored, how it is compared, the verdict.

Knows nothing of pytest (``nsightx.pytest_plugin`` holds the hooks and the fixture), so it can be read and tested
as plain Python. It imports only the standard library and ``nsightx._errors`` at module level: pytest imports the
plugin at every start, and the plugin must cost nothing unless used. The comparison is :func:`nsightx.compare`
itself, the one ``nsightx compare`` runs, with the same gate (:func:`nsightx._report.compare.gate_failed`) and the same
tables.

The gate never passes on nothing: a test whose result could not be compared with its baseline (no annotation,
config or metric in both), an unreadable baseline, or a session in which no test was compared at all fails it.
A test without a stored baseline is listed; it fails the gate only with ``require_all``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nsightx._errors import CompareError, NsightxError

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.results import ProfileResults

DEFAULT_THRESHOLD_PCT = 5.0
"""The default of ``--nsightx-threshold`` (the same as ``nsightx compare --threshold``)."""

_READABLE_MAX = 120
"""Longest readable part of a result file name (the hash keeps names unique; the whole stays under 255 bytes)."""


def result_filename(nodeid: str) -> str:
    """The file name of a test's stored result: its node id in safe characters, then a short hash of it.

    ``tests/test_mm.py::test_mm[1024-fp32]`` becomes ``tests_test_mm.py_test_mm_1024-fp32-<10 hex>.json``. Only
    ``A-Z a-z 0-9 _ . -`` appear, on every file system and in CI artifact names; the hash of the exact node id
    keeps two tests apart whose ids differ only in the characters replaced (``a/b`` and ``a_b``) or beyond the
    readable part's length.
    """
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.-")[:_READABLE_MAX] or "test"
    digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
    return f"{readable}-{digest}.json"


_STORED = re.compile(r"-[0-9a-f]{10}\.json$")
"""What :func:`result_filename` names end with (to tell stored results from other files in a folder)."""


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

    def record(self, nodeid: str, result: ProfileResults) -> None:
        """Compare a passed test's result with its baseline (if comparing), then save it (if saving).

        The baseline is read before the result is saved, so ``--nsightx-save`` and ``--nsightx-compare`` may
        name the same folder.

        Raises:
            ConfigError: the result cannot be written.
        """
        name = result_filename(nodeid)
        if self.settings.compare_dir is not None:
            self.outcomes.append(self._compare(nodeid, self.settings.compare_dir / name, result))
        if self.settings.save_dir is not None:
            self.saved.append(result.save(self.settings.save_dir / name))

    def not_recorded(self, nodeid: str, why: str) -> None:
        """Note a test whose result is kept out of the gate (it failed or skipped after measuring)."""
        if self.settings.active:
            self.outcomes.append(Outcome(nodeid, "not recorded", message=why))

    def _compare(self, nodeid: str, baseline: Path, result: ProfileResults) -> Outcome:
        from nsightx._report.compare import compare

        if not baseline.is_file():
            return Outcome(nodeid, "no baseline", baseline, message=f"no stored result {str(baseline)!r}")
        try:
            frame = compare(
                baseline, result, threshold_pct=self.settings.threshold_pct, require_all=self.settings.require_all
            )
        except CompareError as e:
            return Outcome(nodeid, "nothing compared", baseline, message=_one_line(e))
        except NsightxError as e:  # an unreadable or foreign baseline file
            return Outcome(nodeid, "bad baseline", baseline, message=_one_line(e))
        return Outcome(nodeid, "compared", baseline, frame)

    def unmatched_baselines(self) -> list[Path]:
        """Stored results in the compare folder that no test of this session measured (renamed, skipped, gone)."""
        folder = self.settings.compare_dir
        if folder is None or not folder.is_dir():
            return []
        measured = {o.baseline.name for o in self.outcomes if o.baseline is not None}
        return sorted(p for p in folder.iterdir() if _STORED.search(p.name) and p.name not in measured)

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

    def report_lines(self, *, verbose: bool = False) -> list[str]:
        """The terminal summary, one entry per test, then the baselines no test measured.

        A test that fails the gate gets its whole table (with ``verbose``, every compared test does); the others
        get one line: the compare verdict, or why there is nothing to compare.
        """
        from nsightx._report.render import render_text, summary

        lines: list[str] = []
        for o in self.outcomes:
            if o.frame is not None and (verbose or o.regressed):
                lines += [f"{o.nodeid}  (baseline {str(o.baseline)!r})", render_text(o.frame), ""]
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
        from nsightx._report.render import render_markdown

        parts = [f"## {self.verdict()}", ""]
        for o in self.outcomes:
            parts.append(f"#### `{o.nodeid}`")
            parts += [render_markdown(o.frame) if o.frame is not None else f"{o.status}: {o.message}", ""]
        return "\n".join(parts) + "\n"


def _by_status(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    by: dict[str, list[Outcome]] = {
        s: [] for s in ("compared", "no baseline", "nothing compared", "bad baseline", "not recorded")
    }
    for o in outcomes:
        by[o.status].append(o)
    return by


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
