"""``nsightx show FILE`` and ``nsightx plot FILE OUT.png``: a saved result, read and drawn without writing code.

Both take what nsightx writes: a saved result (``result-*.parquet`` or ``.json``, ``ProfileResults.save``), a
save of the pytest plugin (``--nsightx-save``'s ``<test>/<NNNN>_*.json``) and a raw ``raw_data-*.jsonl`` (the
completed runs of a sweep, stopped or not). ``show`` also takes a folder of either kind and shows the newest
result of each function or test in it. A warning met while reading (a stopped sweep, an unfinished last line)
is one line on stderr.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError
from nsightx._report.history import NODE_KEY
from nsightx._report.sources import load_side
from nsightx._results.summary import device_label, fit, render_text, summarize, unstable_warning

if TYPE_CHECKING:
    from nsightx._results.profileresults import ProfileResults


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def load_results(path: str, command: str) -> list[tuple[ProfileResults, Path | None]]:
    """The results ``path`` holds (see the module docstring), each with its file; warnings go to stderr.

    Raises:
        ResultSchemaError: the file is not a result, or the folder holds none.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sources = load_side(path)
    for said in dict.fromkeys(_one_line(str(w.message)) for w in caught):
        print(f"nsightx {command}: warning: {said}", file=sys.stderr)
    return [(s.result, s.path) for s in sources]


def heading(result: ProfileResults, path: Path | None) -> str:
    """What the table is: function, configs and runs, device and backend, when, and the test or file it came from."""
    data = result.data
    plan = data.plan
    runs = f"auto (<= {plan.runs}) runs" if plan.adaptive else f"{plan.runs} run(s)"
    done = result.completeness
    held = "" if done.complete else f" ({done.describe()})"
    node = data.environment.get(NODE_KEY)
    source = f"test {node}" if node else (path.name if path is not None else "")
    device = device_label(plan.backend, data.environment)
    return f"{plan.function}: {len(plan.configs)} config(s) x {runs}{held} on {device}, measured {data.created}" + (
        f" [{source}]" if source else ""
    )


def show(path: str, width: int | None) -> int:
    """Print each result of ``path``: its heading, then the table in readable units fitting ``width``."""
    found = load_results(path, "show")
    for number, (result, file) in enumerate(found):
        if number:
            print()
        print(heading(result, file))
        summary = summarize(result.to_dataframe(), result.data.plan.params, text=True)
        if not summary.rows:
            print("(no completed run)")
            continue
        summary, above = fit(summary, width)
        for line in above:
            print(line)
        print(render_text(summary))
        warning = unstable_warning(summary)
        if warning:
            sys.stdout.flush()
            print(f"nsightx show: warning: {warning}", file=sys.stderr)
    return 0


def plot(path: str, out: str, metric: str | None, **options: Any) -> Path:
    """Draw the default plot of the one result of ``path`` to ``out`` (a result of several metrics: the first).

    Raises:
        ConfigError: ``path`` holds several results, or an option does not fit the result.
    """
    found = load_results(path, "plot")
    if len(found) != 1:
        names = ", ".join(f"{r.data.plan.function} ({f.name if f else '-'})" for r, f in found)
        raise ConfigError(f"{path} holds {len(found)} results ({names}); give one of their files to nsightx plot")
    result = found[0][0]
    metrics = list(dict.fromkeys(result.to_dataframe()["Metric"].tolist()))
    # ``--metric ""`` is a metric name the result lacks: refused as the API refuses it, never read as "the first"
    chosen = metric if metric is not None else (metrics[0] if metrics else None)
    written = result.plot(out, metric=chosen, **{k: v for k, v in options.items() if v is not None})
    others = [m for m in metrics if m != chosen]
    if metric is None and others:
        print(
            f"nsightx plot: drew {chosen}; the result also holds {', '.join(others)} (--metric NAME)",
            file=sys.stderr,
        )
    return written
