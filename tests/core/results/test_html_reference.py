"""The notebook view (``ProfileResults._repr_html_``) against a naive reference, with names that are not plain.

docs/api.md: the view shows annotation, config, metric, mean and 95 % CI, spread, runs, stability and ``Tool`` under
a caption naming the function and the device, every name HTML-escaped, the unstable rows named below it. Random
results (``test_frame_reference``'s shapes: NaN, infinite, zero and negative values, one run, failed regions,
normalised and derived rows) get odd names everywhere a name is shown (function, parameters, config values,
annotations, metrics, the GPU): markup (``<script>``, ``</td>``), ``&`` and entities, quotes, line breaks, tabs,
terminal escapes and very long names. The HTML is parsed back with Python's parser, and:

- the only elements are the table's own (no markup came from a name), the only attributes its styles;
- every name in a cell reads back as the printed table writes it (``cell_text``: a line break as ``\\n``, a tab as
  ``\\t``, a terminal escape as ``\\x1b``; the parser decodes the HTML escapes), none cut: a browser would
  collapse the raw characters (``a\\nb`` read as ``a b``, another name);
- there is one row per frame row, in the frame's order, and its numbers are the printed table's cells
  (``render_text``'s, checked against the frame by ``test_display_reference``);
- the caption names the function, the number of configs and runs and the device;
- the warning under the table is the printed one (``unstable_warning``), names and all.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from html.parser import HTMLParser
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frame_reference import Shape, shapes
from test_frame_reference import build as build_plain

import nsightx
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.summary import summarize, unstable_warning
from nsightx._textcell import cell_text

EXAMPLES = int(os.environ.get("NSIGHTX_HTML_EXAMPLES", "40"))
"""Examples per run (more while hunting: ``NSIGHTX_HTML_EXAMPLES=400``)."""

ODD = [
    "<script>alert(1)</script>",
    "</td><td>x",
    "a & b",
    "&amp;",
    "&lt;b&gt;",
    'say "hi"',
    "it's",
    "line\nbreak",
    "tab\there",
    "\x1b[31mred\x1b[0m",
    "y" * 300,
    "<!-- c -->",
    "ü-naïve 矩阵",
]
"""Names a result may hold: markup, entities, quotes, control characters, very long, unicode."""
NAMES = st.sampled_from(ODD)

ELEMENTS = {"table", "caption", "thead", "tbody", "tr", "th", "td", "p"}


class _Page(HTMLParser):
    """Every element and attribute seen, the caption, the header and data cells, and the text of a ``<p>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: set[str] = set()
        self.caption = ""
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self.paragraphs: list[str] = []
        self.comments: list[str] = []
        self._text: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.update(name for name, _ in attrs)
        if tag == "tr":
            self.rows.append([])
        if tag in ("th", "td", "caption", "p"):
            self._text = ""

    def handle_endtag(self, tag: str) -> None:
        text = self._text or ""
        if tag == "th":
            self.header.append(text)
        elif tag == "td":
            self.rows[-1].append(text)
        elif tag == "caption":
            self.caption = text
        elif tag == "p":
            self.paragraphs.append(text)
        if tag in ("th", "td", "caption", "p"):
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text += data

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


@dataclasses.dataclass
class Names:
    """The odd names given to a shape's function, parameters, config values, annotations, metrics and GPU."""

    function: str
    params: tuple[str, ...]
    configs: list[tuple[Any, ...]]
    annotations: dict[str, str]
    metrics: dict[str, str]
    gpu: str


@st.composite
def named_shapes(draw: Any) -> tuple[Shape, Names]:
    """A shape of ``test_frame_reference`` and odd names for everything it shows."""
    shape: Shape = draw(shapes())
    distinct = st.lists(NAMES, unique=True, min_size=len(shape.params), max_size=len(shape.params))
    params = tuple(draw(distinct))
    configs = [
        tuple(draw(st.one_of(NAMES, st.integers(-5, 5), st.floats(-1e3, 1e3))) for _ in params) for _ in shape.configs
    ]
    if len({tuple(map(repr, c)) for c in configs}) < len(configs):  # configs are distinct: keep them so
        configs = [(*c[:-1], f"{c[-1]}#{i}") for i, c in enumerate(configs)]
    annotations = dict(zip(shape.annotations, draw(st.lists(NAMES, unique=True, min_size=3, max_size=3)), strict=False))
    metrics = {m: f"{draw(NAMES)}.{m}" for m in (*shape.metrics, "doubled")}
    return shape, Names(draw(NAMES), params, configs, annotations, metrics, draw(NAMES))


def build(shape: Shape, names: Names) -> ProfileResults:
    """``shape``'s result with every name replaced by its odd one (the values and their units kept)."""
    plain = build_plain(shape)
    data = plain.data
    plan = data.plan.model_copy(
        update=dict(
            function=names.function,
            params=names.params,
            configs=tuple(names.configs),
            metrics=tuple(names.metrics[m] for m in data.plan.metrics),
            normalize_against=None if shape.normalize is None else names.annotations[shape.normalize],
            derive_metric=None,
        )
    )
    runs = [
        dataclasses.replace(
            run,
            records=tuple(
                dataclasses.replace(rec, annotation=names.annotations[rec.annotation], metric=names.metrics[rec.metric])
                for rec in run.records
            ),
            regions=tuple(
                dataclasses.replace(reg, annotation=names.annotations[reg.annotation]) for reg in run.regions
            ),
            collectors=(),
        )
        for run in data.runs
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_results(
            plan,
            runs,
            {"GPU": names.gpu},
            combine=(lambda a, b: a + b) if shape.combine else None,
            derive_metric=_doubled(names.metrics["doubled"]) if shape.derive else None,
            created="2026-12-06T00:00:00+00:00",
        )


def _doubled(name: str) -> Any:
    def derive(*args: Any) -> tuple[float, str]:
        return 2.0 * args[0], "ns"

    derive.__name__ = name
    return derive


def check_page(text: str, frame: pd.DataFrame, result: ProfileResults, names: Names) -> None:
    """The parsed page against the frame, the printed table's cells and the names as written."""
    page = _Page()
    page.feed(text)
    page.close()
    assert set(page.tags) <= ELEMENTS and page.attrs <= {"class", "style"}, (set(page.tags), page.attrs)
    assert not page.comments, page.comments
    assert page.tags.count("table") == 1 and page.tags.count("tr") == len(frame) + 1, page.tags.count("tr")
    params = names.params
    summary = summarize(frame, params, text=True)
    assert page.header == list(summary.header), page.header
    assert page.header[1 : 1 + len(params)] == list(params), page.header
    runs = result.data.plan.runs
    assert (
        page.caption
        == f"{names.function}: {len(names.configs)} config(s) x {runs} run(s) on {names.gpu} (cupti backend)"
    )
    rows = [r for r in page.rows if r]
    assert len(rows) == len(frame), (len(rows), len(frame))
    for cells, row, record in zip(rows, summary.rows, frame.to_dict("records"), strict=True):
        got = dict(zip(page.header, cells, strict=True))
        assert got["Annotation"] == cell_text(record["Annotation"]), (got["Annotation"], record["Annotation"])
        assert [got[p] for p in params] == ["-" if record[p] is None else cell_text(str(record[p])) for p in params]
        assert got["Metric"] == cell_text(record["Metric"]), (got["Metric"], record["Metric"])
        assert "\n" not in "".join(cells) and "\t" not in "".join(cells) and "\x1b" not in "".join(cells), cells
        assert cells == list(row.cells), (cells, row.cells)
    warning = unstable_warning(summary)
    assert page.paragraphs == ([] if warning is None else [f"warning: {warning}"]), page.paragraphs


SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@SETTINGS
@given(named=named_shapes())
def test_the_notebook_view_shows_every_row_and_every_name_as_written(named: tuple[Shape, Names]) -> None:
    shape, names = named
    result = build(shape, names)
    try:
        frame = result.to_dataframe()
    except nsightx.ConfigError as error:  # nothing to normalise against: test_frame_reference's property
        assert "no baseline value" in str(error) or "names no annotation" in str(error), error
        return
    check_page(result._repr_html_(), frame, result, names)


def test_a_name_with_a_line_break_reads_in_the_notebook_as_in_the_printed_table() -> None:
    """``a\\nb`` used to be written raw into its cell, where the browser shows ``a b``: another name than the
    printed table's ``a\\\\nb``. The two views now hold the same cell text, a tab and an escape sequence alike."""
    name = "a\nb\tc\x1b[31m"

    @nsightx.analyze.kernel(configs=[()], runs=2, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def f() -> None:
        with nsightx.annotate(name):
            pass

    result = f()
    page = _Page()
    page.feed(result._repr_html_())
    page.close()
    printed = summarize(result.to_dataframe(), (), text=True).rows[0].cells
    assert page.rows[1][0] == printed[0] == "a\\nb\\tc\\x1b[31m"
