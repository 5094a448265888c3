"""The ncu command line built for each option (pure; no ncu needed)."""

from __future__ import annotations

import pytest
from nsightx_ncu._backend import NcuBackend
from nsightx_ncu._command import (
    NcuOptions,
    build_command,
    check_metrics,
    nvtx_filter,
    parse_range_name,
    range_name,
)

import nsightx
from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._results.records import RegionId
from nsightx._spec.select import option_defaults

APP = ["/usr/bin/python3", "-m", "nsightx_ncu._worker", "/tmp/x/spec.json"]


def build(**kw):
    # the plan's resolved values for options the decorator leaves unset (their one default)
    defaults = option_defaults(NcuBackend.capabilities)
    args = {"report": "/tmp/x/r.ncu-rep", "app": APP, "metrics": ["gpu__time_duration.sum"], **defaults}
    args.update(kw)
    return build_command("/usr/local/cuda/bin/ncu", **args)


def value_of(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def test_default_command_is_exact():
    assert build() == [
        "/usr/local/cuda/bin/ncu",
        "--export",
        "/tmp/x/r.ncu-rep",
        "--force-overwrite",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        "regex:nsightx@.+",  # process-wide start/end ranges (no trailing '/')
        "--replay-mode",
        "kernel",
        "--cache-control",
        "all",
        "--clock-control",
        "none",
        "--metrics",
        "gpu__time_duration.sum",
        *APP,
    ]


@pytest.mark.parametrize("mode", ["kernel", "range", "application"])
def test_replay_modes(mode):
    assert value_of(build(replay_mode=mode), "--replay-mode") == mode


@pytest.mark.parametrize("cache", ["all", "none"])
def test_cache_control(cache):
    assert value_of(build(cache_control=cache), "--cache-control") == cache


@pytest.mark.parametrize("clock", ["none", "base"])
def test_clock_control_including_base(clock):
    # "base" locks the GPU clocks: it is only ever checked here, never run on the shared H200.
    cmd = build(clock_control=clock)
    assert value_of(cmd, "--clock-control") == clock
    assert cmd.count("--clock-control") == 1


@pytest.mark.parametrize(
    ("option", "value"),
    [("replay_mode", "graph"), ("cache_control", "some"), ("clock_control", "boost")],
)
def test_bad_values_are_config_errors_naming_the_accepted_ones(option, value):
    # checked once, by the profile spec at decoration, before any command is built
    with pytest.raises(ConfigError, match=f"^{option} must be '[a-z]+', or '[a-z]+'; got '{value}'"):
        nsightx.analyze.kernel(backend="ncu", **{option: value})


def test_several_metrics_are_one_comma_list():
    cmd = build(metrics=[" gpu__time_duration.sum", "dram__bytes_read.sum "])
    assert value_of(cmd, "--metrics") == "gpu__time_duration.sum,dram__bytes_read.sum"


def test_set_and_sections():
    opts = NcuOptions(ncu_set="basic", ncu_sections=("SpeedOfLight", "MemoryWorkloadAnalysis"))
    cmd = build(options=opts)
    assert value_of(cmd, "--set") == "basic"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"] == ["SpeedOfLight", "MemoryWorkloadAnalysis"]
    assert cmd.index("--section") < cmd.index(APP[0])
    assert opts.deep and not NcuOptions().deep


def test_extra_args_verbose_and_push_pop_filter():
    opts = NcuOptions(ncu_extra_args=("--launch-skip", "2"), ncu_nvtx_ranges="push_pop")
    cmd = build(options=opts, verbose=True)
    assert value_of(cmd, "--nvtx-include") == "regex:nsightx@.+/"
    assert "--verbose" in cmd
    assert cmd[-len(APP) - 2 : -len(APP)] == ["--launch-skip", "2"]


def test_shell_characters_stay_single_arguments():
    evil = "gpu__time_duration.sum;rm -rf ~ `x` $(y) 'q\""
    cmd = build(metrics=[evil], report="/tmp/a b/$HOME;'r'.ncu-rep")
    assert value_of(cmd, "--metrics") == evil
    assert value_of(cmd, "--export") == "/tmp/a b/$HOME;'r'.ncu-rep"


def test_metric_names_are_checked():
    with pytest.raises(ConfigTypeError, match="list of names"):
        check_metrics("gpu__time_duration.sum")
    with pytest.raises(ConfigError, match="no comma"):
        check_metrics(["a,b"])
    with pytest.raises(ConfigError, match="non-empty"):
        check_metrics(["  "])


def test_options_from_mapping_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ConfigError, match="accepted keys: ncu_set, ncu_sections"):
        NcuOptions.from_mapping({"ncu_sets": "basic"})
    with pytest.raises(ConfigTypeError, match="list of strings"):
        NcuOptions.from_mapping({"ncu_sections": "SpeedOfLight"})
    with pytest.raises(ConfigError, match="ncu_timeout_s"):
        NcuOptions.from_mapping({"ncu_timeout_s": 0})
    with pytest.raises(ConfigError, match="ncu_nvtx_ranges"):
        NcuOptions.from_mapping({"ncu_nvtx_ranges": "both"})
    assert NcuOptions.from_mapping(None) == NcuOptions()
    assert NcuOptions.from_mapping({"ncu_sections": ["SpeedOfLight"]}).ncu_sections == ("SpeedOfLight",)


@pytest.mark.parametrize("name", ["matmul", "a|b", "x/y@z", "100%", "tab\there", "ünïcode", "config=1|run=2", ""])
def test_range_names_round_trip(name):
    region = RegionId(annotation=name, config=3, run=7)
    encoded = range_name(region)
    assert "/" not in encoded and "@" not in encoded
    assert encoded.endswith("|config=3|run=7")
    assert parse_range_name(encoded) == region


def test_range_name_is_readable_and_foreign_names_are_ignored():
    assert range_name(RegionId(annotation="matmul fp32", config=0, run=1)) == "matmul fp32|config=0|run=1"
    assert parse_range_name("matmul") is None
    assert parse_range_name("a|config=x|run=1") is None
    assert parse_range_name("a|run=1|config=2") is None


def test_nvtx_filter_kinds():
    assert nvtx_filter("push_pop") == "regex:nsightx@.+/"
    assert nvtx_filter("start_end") == "regex:nsightx@.+"
    assert nvtx_filter() == nvtx_filter("start_end")
    assert NcuOptions().ncu_nvtx_ranges == "start_end"


@pytest.mark.parametrize(
    ("extra", "flag", "instead"),
    [
        (("--cache-control", "none"), "--cache-control", "cache_control="),
        (("--clock-control=base",), "--clock-control", "clock_control="),
        (("--replay-mode", "application"), "--replay-mode", "replay_mode="),
        (("--launch-count", "3", "--metrics", "sm__cycles_elapsed.avg"), "--metrics", "metrics="),
        (("-o", "/tmp/r"), "-o", "output_prefix="),
        (("--nvtx-include", "regex:.*"), "--nvtx-include", "annotate()"),
    ],
)
def test_extra_args_repeating_an_option_nsightx_sets_are_refused_naming_it(extra, flag, instead):
    """A second --cache-control would leave to ncu which value counts while the result says the first."""
    with pytest.raises(ConfigError) as info:
        NcuOptions.from_mapping({"ncu_extra_args": list(extra)})
    assert repr(flag) in str(info.value) and instead in str(info.value)
