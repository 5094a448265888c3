"""``nsightx.load`` of damaged files: it returns exactly what the file holds, or raises an ``NsightxError``.

Real results (host backend, 2 configs x 2 runs, two regions; in one of the two sweeps a region fails in config 1,
so that some values are NaN) are saved as JSON, as Parquet and as a raw file of an ``output_prefix`` run, then cut
at random offsets and edited at random (bytes flipped, lines deleted, duplicated or swapped, numbers changed, keys
deleted, types changed, list entries duplicated or removed; in a Parquet file: bytes flipped, ranges overwritten,
deleted or repeated). For each damaged file, ``nsightx.load``:

- raises an :class:`~nsightx.NsightxError` (never another exception), or
- returns a result whose every field is what the file says (compared field by field with the file's JSON; a
  field the file leaves out has its default), that holds nothing twice and whose tables can be built; for an
  unchanged file, the very result that was saved. A Parquet file has no text to compare with: a damaged one
  loads as exactly the result that was saved, or not at all.

Hypothesis runs derandomized, without an example database and with a bounded number of examples, so the test is
the same on every run and takes a few seconds.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx import NsightxError

FUZZ = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Saved(dict):  # type: ignore[type-arg]
    """Measured sweeps and their files, with a short repr, so that a failing example does not print whole files."""

    def __repr__(self) -> str:
        return f"<{self.get('name', 'measured sweeps')}>"


def _measure(tmp: Path, fail: bool) -> Saved:
    """One measured sweep (region ``b`` fails in config 1 when ``fail``): result, saved bytes, raw file's bytes."""

    @nsightx.analyze.kernel(
        configs=[(1, "x"), (2, "y")],
        runs=2,
        warmup=0,
        backend="host",
        verbosity=nsightx.VerbosityLevel.SILENT,
        output_prefix=str(tmp) + "/",
    )
    def f(n: int, label: str) -> None:
        with nsightx.annotate("a"):
            sum(range(100 * n))
        with nsightx.annotate("b", ignore_failures=True):
            if fail and n == 2:
                raise ValueError("on purpose: a failed region, stored as NaN")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = f()
    path = res.save(tmp / "r.json")
    parquet = res.save(tmp / "r.parquet").read_bytes()
    raw = Path(str(res.environment["raw_data"]))
    return Saved(name=f"sweep in {tmp.name}", result=res, json=path.read_bytes(), raw=raw.read_bytes(), parquet=parquet)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two measured sweeps, one with NaN values (a failed region) and one without, and a folder for damaged files."""
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings()).load()
    previous = _plugins._default
    _plugins.set_default_host(host)
    try:
        yield Saved(
            sweeps=[_measure(tmp_path_factory.mktemp(name), name == "nan") for name in ("plain", "nan")],
            tmp=tmp_path_factory.mktemp("damaged"),
        )
    finally:
        _plugins.set_default_host(previous)


# --- edits ---------------------------------------------------------------------------------------------------


@st.composite
def text_edit(draw: st.DrawFn, data: bytes) -> bytes:
    """One edit of the bytes: cut, flip a byte, or delete, duplicate or swap lines."""
    kind = draw(st.sampled_from(["cut", "flip", "delete", "duplicate", "swap"]))
    if kind == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if kind == "flip":
        if not data:
            return data
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(draw(st.integers(0, len(lines))), lines[i])
    else:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


NEW_VALUES = st.one_of(
    st.integers(-3, 5),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from(["", "0", "1.5", "a", "region", "x"]),
    st.booleans(),
    st.none(),
    st.just([]),
    st.just({}),
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``node`` (not ``node`` itself)."""
    keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
    for key in keys:
        yield (*path, key)
        yield from _paths(node[key], (*path, key))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def json_edit(draw: st.DrawFn, doc: Any) -> Any:
    """One edit of a parsed JSON document at a random place: delete a key or entry, duplicate a list entry,
    change a number, or replace a value by one of another type."""
    paths = list(_paths(doc))
    if not paths:
        return draw(NEW_VALUES)
    kind = draw(st.sampled_from(["delete", "duplicate", "number", "replace"]))
    if kind == "duplicate":
        lists = [p for p in paths if isinstance(_at(doc, p), list) and _at(doc, p)]
        if lists:
            entries = _at(doc, draw(st.sampled_from(lists)))
            entry = entries[draw(st.integers(0, len(entries) - 1))]
            entries.insert(draw(st.integers(0, len(entries))), json.loads(json.dumps(entry)))
            return doc
    path = draw(st.sampled_from(paths))
    parent, key = _at(doc, path[:-1]), path[-1]
    node = parent[key]
    if kind == "delete":
        del parent[key]
    elif kind == "number" and isinstance(node, int | float) and not isinstance(node, bool):
        parent[key] = node + draw(st.sampled_from([-1, 1, 2, 0.5]))
    else:
        parent[key] = draw(NEW_VALUES)
    return doc


@st.composite
def damaged_result(draw: st.DrawFn, data: bytes) -> bytes:
    """A saved result after one to three edits (of its text or of its JSON)."""
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            data = draw(text_edit(data))
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        data = json.dumps(draw(json_edit(doc)), separators=(",", ":")).encode()
    return data


@st.composite
def damaged_raw(draw: st.DrawFn, data: bytes) -> bytes:
    """A raw file after one to three edits (of its text or of the JSON of one line)."""
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            data = draw(text_edit(data))
            continue
        lines = data.split(b"\n")
        i = draw(st.integers(0, len(lines) - 1))
        try:
            doc = json.loads(lines[i])
        except ValueError:
            continue
        lines[i] = json.dumps(draw(json_edit(doc)), separators=(",", ":")).encode()
        data = b"\n".join(lines)
    return data


# --- what a loaded result must be ----------------------------------------------------------------------------


def _same(written: Any, loaded: Any, where: str = "") -> None:
    """``loaded`` (a dumped field) is what ``written`` (the file's JSON) says; absent keys keep their default."""
    if isinstance(written, dict):
        assert isinstance(loaded, dict), where
        assert set(written) <= set(loaded), (where, set(written) - set(loaded))
        for k, v in written.items():
            _same(v, loaded[k], f"{where}.{k}")
    elif isinstance(written, list):
        assert isinstance(loaded, list) and len(written) == len(loaded), where
        for i, (w, got) in enumerate(zip(written, loaded, strict=True)):
            _same(w, got, f"{where}[{i}]")
    elif isinstance(written, float) and math.isnan(written):
        assert loaded is None, where  # NaN is written as null
    else:
        assert type(written) is type(loaded) or (
            isinstance(written, int | float) and isinstance(loaded, float) and not isinstance(written, bool)
        ), (where, written, loaded)
        assert written == loaded, (where, written, loaded)


def _usable(back: nsightx.ProfileResults) -> None:
    """The loaded result holds nothing twice and its tables build (or refuse with an NsightxError)."""
    values = [(v.annotation, v.config, v.run, v.metric) for v in back.data.values]
    assert len(set(values)) == len(values)
    runs = [(r.config, r.run) for r in back.data.runs if r.config >= 0]
    assert len(set(runs)) == len(runs)
    n = len(back.data.plan.configs)
    assert all(0 <= c < n and 0 <= r < back.data.plan.runs for c, r in runs)
    try:
        back.to_dataframe()
        back.runs_dataframe()
    except NsightxError:
        pass


def _load(tmp: Path, name: str, data: bytes) -> nsightx.ProfileResults | None:
    path = tmp / name
    path.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            back = nsightx.load(path)
    except NsightxError as e:
        event(f"refused: {type(e).__name__}")
        return None
    event("loaded")
    return back


@FUZZ
@given(st.data())
def test_a_damaged_result_loads_as_written_or_raises_an_nsightx_error(saved, data):
    sweep = data.draw(st.sampled_from(saved["sweeps"]))
    damaged = data.draw(damaged_result(sweep["json"]))
    back = _load(saved["tmp"], "damaged.json", damaged)
    if back is None:
        return
    _usable(back)
    if damaged == sweep["json"]:
        original = sweep["result"]
        assert back.data.model_dump_json() == original.data.model_dump_json()
        pd.testing.assert_frame_equal(back.to_dataframe(), original.to_dataframe())
        return
    _same(json.loads(damaged), json.loads(back.data.model_dump_json()))


def _raw_runs(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the run lines of a raw file that loaded (an unfinished last line left out), independently."""
    lines = data.split(b"\n")
    header: dict[str, Any] = {}
    runs: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            assert number == len(lines), f"line {number} is not JSON, yet the file loaded"
            continue
        if obj.get("kind") == "nsightx-raw":
            header = obj
        else:
            obj.pop("sweep")
            runs.append(obj)
    return header, sorted(runs, key=lambda r: (r["config"], r["run"]))


@FUZZ
@given(st.data())
def test_a_damaged_raw_file_loads_as_written_or_raises_an_nsightx_error(saved, data):
    sweep = data.draw(st.sampled_from(saved["sweeps"]))
    damaged = data.draw(damaged_raw(sweep["raw"]))
    back = _load(saved["tmp"], "damaged.jsonl", damaged)
    if back is None:
        return
    _usable(back)
    header, runs = _raw_runs(damaged)
    _same(header["plan"], json.loads(back.data.plan.model_dump_json()), "plan")
    _same(runs, [json.loads(r.model_dump_json()) for r in back.data.runs], "runs")
    if damaged == sweep["raw"]:
        original = sweep["result"]
        assert back.data.runs == original.data.runs
        pd.testing.assert_frame_equal(back.to_dataframe(), original.to_dataframe())


@st.composite
def damaged_parquet(draw: st.DrawFn, data: bytes) -> bytes:
    """A Parquet result after one to three byte edits: cut, flip, overwrite, delete or repeat a range."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "overwrite", "delete", "repeat"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "cut":
            data = data[:at]
        elif kind == "flip":
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        else:
            end = min(len(data), at + draw(st.integers(1, 64)))
            if kind == "overwrite":
                data = data[:at] + draw(st.binary(min_size=end - at, max_size=end - at)) + data[end:]
            elif kind == "delete":
                data = data[:at] + data[end:]
            else:
                data = data[:end] + data[at:]
    return data


@FUZZ
@given(st.data())
def test_a_damaged_parquet_result_loads_as_saved_or_raises_an_nsightx_error(saved, data):
    sweep = data.draw(st.sampled_from(saved["sweeps"]))
    assert sweep["parquet"][:4] == b"PAR1"
    damaged = data.draw(damaged_parquet(sweep["parquet"]))
    back = _load(saved["tmp"], "damaged.parquet", damaged)
    if back is None:
        return
    try:
        loaded = back.data  # the objects are built when first read: a problem found then is an NsightxError too
    except NsightxError:
        event("refused when built")
        return
    original = sweep["result"]
    assert loaded.model_dump_json() == original.data.model_dump_json()
    pd.testing.assert_frame_equal(back.to_dataframe(), original.to_dataframe())
    pd.testing.assert_frame_equal(back.runs_dataframe(), original.runs_dataframe())
