"""Result schema: JSON round trip, version checks, files written under output_prefix."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import nsightx
from nsightx import ResultSchemaError
from nsightx._results.sink import read_raw

SILENT = nsightx.VerbosityLevel.SILENT


def make(tmp_path=None, **options):
    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=3,
        backend="host",
        verbosity=SILENT,
        output_prefix=str(tmp_path) + "/" if tmp_path else None,
        **options,
    )
    def f(n):
        with nsightx.annotate("a"):
            sum(range(100 * n))
        with nsightx.annotate("b"):
            pass

    return f


def test_save_load_round_trip(plugin_host, tmp_path):
    res = make()()
    path = res.save(tmp_path / "r.json")
    back = nsightx.load(path)
    assert back.data == res.data
    pd.testing.assert_frame_equal(back.to_dataframe(), res.to_dataframe())
    assert back.backend == "host" and back.environment["Host"]


def test_newer_schema_is_refused_with_upgrade_hint(plugin_host, tmp_path):
    path = make()().save(tmp_path / "r.json")
    doc = json.loads(path.read_text())
    doc["schema_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultSchemaError, match=r"schema v99.*upgrade nsightx"):
        nsightx.load(path)


def test_garbage_file_is_schema_error(tmp_path):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(ResultSchemaError, match="not an nsightx result"):
        nsightx.load(tmp_path / "x.json")
    with pytest.raises(ResultSchemaError, match="cannot read"):
        nsightx.load(tmp_path / "missing.json")


def test_output_files_and_csv_layout(plugin_host, tmp_path):
    make(tmp_path, output_csv=True)()
    make(tmp_path, output_csv=True)()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "processed_data-f-0.csv",
        "processed_data-f-1.csv",
        "profiled_data-f-0.csv",
        "profiled_data-f-1.csv",
        "raw_data-f-0.jsonl",
        "raw_data-f-1.jsonl",
        "result-f-0.parquet",
        "result-f-1.parquet",
    ]
    profiled = pd.read_csv(tmp_path / "profiled_data-f-0.csv")
    assert len(profiled) == 2 * 3 * 2 and profiled.columns[-1] == "n"
    processed = pd.read_csv(tmp_path / "processed_data-f-0.csv")
    assert len(processed) == 4 and "CI95_Upper" in processed.columns


def test_prefix_with_stem(plugin_host, tmp_path):
    @nsightx.analyze.kernel(
        configs=[(1,)], runs=1, backend="host", verbosity=SILENT, output_prefix=str(tmp_path / "sub" / "exp1_")
    )
    def g(n):
        with nsightx.annotate("a"):
            pass

    g()
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [
        "exp1_raw_data-g-0.jsonl",
        "exp1_result-g-0.parquet",
    ]


def test_crash_halfway_keeps_completed_runs_on_disk(plugin_host, tmp_path):
    calls = {"n": 0}

    @nsightx.analyze.kernel(
        configs=[(1,), (2,)], runs=3, warmup=0, backend="host", verbosity=SILENT, output_prefix=str(tmp_path) + "/"
    )
    def f(n):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt  # Ctrl-C in the 5th run
        with nsightx.annotate("a"):
            pass

    with pytest.raises(KeyboardInterrupt):
        f()
    runs = read_raw(tmp_path / "raw_data-f-0.jsonl")
    assert [(r.config, r.run) for r in runs] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert all(r.records[0].metric == "host__time_duration.sum" for r in runs)


def test_records_and_region_host_time(plugin_host):
    res = make()()
    assert len(res.records) == 2 * 3 * 2
    regions = [reg for run in res.data.runs for reg in run.regions]
    assert all(reg.host_ns > 0 for reg in regions)
    assert repr(res).startswith("ProfileResults(f, backend='host'")


def test_save_replaces_the_file_atomically(plugin_host, tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old result")
    (tmp_path / "reader.json").hardlink_to(target)  # a reader holding the old file
    make()().save(target)
    assert (tmp_path / "reader.json").read_text() == "old result"  # a new file was put in place, not rewritten
    assert nsightx.load(target).data.plan.function == "f"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "reader.json"]  # no temporary file left


def test_save_to_a_folder_is_a_clear_error(plugin_host, tmp_path):
    with pytest.raises(nsightx.ConfigError, match=r"save\(.*\): that is a folder; give a file path such as"):
        make()().save(tmp_path)


def test_save_under_a_file_is_a_clear_error(plugin_host, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(nsightx.ConfigError, match=r"save\(.*\) failed: .*Error"):
        make()().save(tmp_path / "file" / "r.json")


@pytest.mark.parametrize(
    ("drop", "field"),
    [
        (("plan", "params"), "plan.params"),
        (("created",), "created"),
        (("runs", 0, "records", 0, "metric"), r"runs\[0\]\.records\[0\]\.metric"),
    ],
)
def test_load_of_a_file_missing_a_field_names_the_field(plugin_host, tmp_path, drop, field):
    path = make()().save(tmp_path / "r.json")
    doc = json.loads(path.read_text())
    where = doc
    for key in drop[:-1]:
        where = where[key]
    del where[drop[-1]]
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultSchemaError, match=rf"is not an nsightx result: field '{field}': missing"):
        nsightx.load(path)


def test_loaded_records_are_lean_and_keep_the_model_methods(plugin_host, tmp_path):
    back = nsightx.load(make()().save(tmp_path / "r.json"))
    run, value = back.data.runs[0], back.data.values[0]
    # slotted: ~100 bytes each instead of a pydantic model's ~1 kB (98c9cf0:benchmarks/load_result.py)
    for obj in (run, run.records[0], run.regions[0], value):
        assert not hasattr(obj, "__dict__"), type(obj).__name__
    assert run.model_copy(update={"config": 7}).config == 7 and run.config == 0
    assert type(run).model_validate(run.model_dump()) == run
    assert type(run).model_validate_json(run.model_dump_json()) == run
    with pytest.raises(ValueError, match=r"surprise\n  Unexpected keyword argument"):
        type(run).model_validate({**run.model_dump(), "surprise": 1})
