"""Why two results share no row: what each side holds where they part.

The first level (test, function, annotation, metric, config) at which the two sides have nothing in common is
named, in the words ``nsightx compare`` prints before it exits with status 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SampleMap = Mapping[tuple[str, str, str, str, str], Any]
"""Samples keyed by (test, function, annotation, metric, config as JSON), as :mod:`nsightx._report.compare` keeps
them (each with ``label``, ``test``, ``params`` and ``config``)."""


def names(values: Iterable[str]) -> str:
    items = sorted(set(values))
    shown = ", ".join(repr(v) for v in items[:6])
    return (shown + f" and {len(items) - 6} more" if len(items) > 6 else shown) or "nothing"


def _configs(samples: SampleMap) -> str:
    seen = {k[4]: s for k, s in samples.items()}
    parts = [
        "(" + ", ".join(f"{p}={v!r}" for p, v in zip(s.params, s.config, strict=False)) + ")"
        if s.params
        else str(list(s.config))
        for s in seen.values()
    ]
    shown = ", ".join(parts[:4])
    return shown + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")


def nothing_compared(base: SampleMap, cand: SampleMap, wanted: frozenset[str] | None) -> str:
    """Why no row of ``base`` and ``cand`` could be compared, in terms of what each side holds."""
    if not base or not cand:
        empty = "baseline" if not base else "new"
        return f"nothing to compare: the {empty} result holds no measured value"
    reasons = _disjoint(base, cand)
    if reasons:
        return "nothing to compare: " + "; ".join(reasons)
    if wanted is not None:
        both = {k[3] for k in base} & {k[3] for k in cand}
        return (
            f"nothing to compare: the metric(s) {sorted(wanted)} are not in both results; metrics in both: "
            f"{names(both)}"
        )
    return (
        "nothing to compare: every row in both results has fewer than 2 valid runs on a side ('too few "
        "runs'); measure with runs=10 or more"
    )


def _disjoint(base: SampleMap, cand: SampleMap) -> list[str]:
    """One reason per level (test, function, then annotation, metric, config) at which the sides share nothing."""
    tb, tn = {k[0] for k in base}, {k[0] for k in cand}
    if not tb & tn:
        return [
            f"no test is in both results (baseline: {names(_labels(base))}; new: {names(_labels(cand))}); "
            "compare folders written by the same tests"
        ]
    fb, fn = {k[:2] for k in base}, {k[:2] for k in cand}
    if not fb & fn:
        return [
            f"no function is in both results (baseline: {names(k[1] for k in fb)}; new: "
            f"{names(k[1] for k in fn)}); compare results of the same decorated function"
        ]
    reasons = []
    for tf in sorted(fb & fn):
        kb = {k: s for k, s in base.items() if k[:2] == tf}
        kn = {k: s for k, s in cand.items() if k[:2] == tf}
        name = f"{next(iter(kb.values())).label}: {tf[1]}" if tf[0] else tf[1]
        for level, label in ((2, "annotation"), (3, "metric")):
            vb, vn = {k[level] for k in kb}, {k[level] for k in kn}
            if not vb & vn:
                reasons.append(f"{name}: no {label} is in both results (baseline: {names(vb)}; new: {names(vn)})")
                break
        else:
            if not {k[4] for k in kb} & {k[4] for k in kn}:
                reasons.append(f"{name}: no config is in both results (baseline: {_configs(kb)}; new: {_configs(kn)})")
    return reasons


def _labels(samples: SampleMap) -> list[str]:
    return [s.label or s.test for s in samples.values()]
