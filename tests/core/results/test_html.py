"""``ProfileResults._repr_html_``: the aggregated table for Jupyter, with units, CIs, stability and Tool, escaped."""

from __future__ import annotations

import html
import re
import time
from html.parser import HTMLParser

import nsightx
from nsightx._results.html import TABLE_CLASS


class _Table(HTMLParser):
    """The text of every header and data cell, and every tag seen (to check no markup came from the data)."""

    def __init__(self) -> None:
        super().__init__()
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self.caption = ""
        self._cell: str | None = None
        self._in = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("th", "td", "caption"):
            self._in, self._cell = tag, ""

    def handle_endtag(self, tag):
        if tag == "th":
            self.header.append(self._cell or "")
        elif tag == "td":
            self.rows[-1].append(self._cell or "")
        elif tag == "caption":
            self.caption = self._cell or ""
        if tag in ("th", "td", "caption"):
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _parse(text: str) -> _Table:
    table = _Table()
    table.feed(text)
    return table


def test_results_render_as_an_html_table(plugin_host):
    @nsightx.analyze.kernel(configs=[(1, "x"), (2, "y")], runs=3, backend="host", verbosity=0)
    def sweep(n, label):
        with nsightx.annotate("sleep"):
            time.sleep(0.002 * n)

    results = sweep()
    text = results._repr_html_()
    assert text.startswith(f'<table class="{TABLE_CLASS}">')
    table = _parse(text)
    assert table.header == ["Annotation", "n", "label", "Metric", "Mean", "95% CI", "RSD", "Runs", "Stable", "Tool"]
    data_rows = [r for r in table.rows if r]
    assert [r[:4] for r in data_rows] == [
        ["sleep", "1", "x", "host__time_duration.sum"],
        ["sleep", "2", "y", "host__time_duration.sum"],
    ]
    frame = results.to_dataframe()
    for row, avg in zip(data_rows, frame["AvgValue"], strict=True):
        assert row[4] == f"{avg / 1e6:.4g} ms"  # 2-4 ms sleeps, shown in ms
        assert re.fullmatch(r"\[-?[\d.]+, [\d.]+\] ms", row[5]), row[5]
        assert row[7] == "3" and row[8] in ("yes", "no") and row[9] == "host"
    assert table.caption == "sweep: 2 config(s) x 3 run(s) on CPU (host backend)"


def test_names_and_values_are_escaped(plugin_host):
    evil = "<script>alert('x')</script> & <b>"

    @nsightx.analyze.kernel(configs=[(evil,)], runs=2, backend="host", verbosity=0)
    def sweep(s):
        with nsightx.annotate(evil):
            pass

    text = sweep()._repr_html_()
    assert "<script>" not in text and "<b>" not in text
    assert html.escape(evil) in text
    table = _parse(text)
    assert set(table.tags) <= {"table", "caption", "thead", "tbody", "tr", "th", "td", "p"}
    assert [r[:2] for r in table.rows if r] == [[evil, evil]]


def test_a_loaded_result_renders_too(plugin_host, tmp_path):
    @nsightx.analyze.kernel(configs=[1], runs=2, backend="host", verbosity=0)
    def sweep(n):
        with nsightx.annotate("a"):
            time.sleep(0.001)

    path = sweep().save(tmp_path / "r.json")
    table = _parse(nsightx.load(path)._repr_html_())
    assert table.header[-1] == "Tool" and [r[-1] for r in table.rows if r] == ["host"]
