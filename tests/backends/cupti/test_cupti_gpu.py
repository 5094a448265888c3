"""The CUPTI backend on a real GPU, through the public API (``pytest -m gpu``; skipped without a GPU)."""

from __future__ import annotations

import operator
import statistics
import threading
import warnings
from typing import Any

import pytest

import nsightx

pytestmark = pytest.mark.gpu

SILENT = nsightx.VerbosityLevel.SILENT


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    return torch


def _regions(result: Any) -> list[Any]:
    return [reg for run in result.data.runs for reg in run.regions]


def _kernel_counts(result: Any) -> dict[tuple[int, int], int]:
    """(config, run) -> the kernels of that run's region."""
    return {(reg.config, reg.run): reg.attributes["kernel_count"] for reg in _regions(result)}


def _matmul_sweep(torch: Any, sizes: tuple[int, ...], options: dict[str, Any]) -> Any:
    """Issue 13's sweep shape on cupti with ``options``: n x n matmuls, inputs made once, 10 runs a size."""
    inputs = {n: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for n in sizes}

    @nsightx.analyze.kernel(
        configs=[(n,) for n in sizes],
        runs=10,
        backend="cupti",
        backend_options=options,
        combine_kernel_metrics=operator.add,  # n = 512 is a split-K matmul on the H200: two kernels
        verbosity=SILENT,
    )
    def mm(n: int) -> None:
        a, b = inputs[n]
        with nsightx.annotate("matmul"):
            a @ b

    return mm()


def test_available_here(plugin_host: Any) -> None:
    avail = plugin_host.backend("cupti").availability()
    assert avail.available, avail.reason


def test_split_k_region_has_two_kernels_and_setup_is_not_counted(plugin_host: Any, torch: Any) -> None:
    @nsightx.analyze.kernel(
        configs=[(512,), (1024,)], runs=3, backend="cupti", combine_kernel_metrics=operator.add, verbosity=SILENT
    )
    def mm(n: int) -> None:
        a = torch.randn(n, n, device="cuda")  # kernels outside the region
        b = torch.randn(n, n, device="cuda")
        with nsightx.annotate("matmul"):
            a @ b

    res = mm()
    assert res.backend == "cupti"
    counts = _kernel_counts(res)
    assert {c for (cfg, _), c in counts.items() if cfg == 0} == {2}
    assert {c for (cfg, _), c in counts.items() if cfg == 1} == {1}
    recs = [r for r in res.records if r.config == 0 and r.run == 0]
    assert [r.seq for r in recs] == [0, 1]
    assert all(r.metric == "gpu__time_duration.sum" and r.unit == "ns" and r.value > 0 for r in res.records)
    df = res.to_dataframe()
    assert (df["Tool"] == "cupti").all()
    assert len(df) == 2
    env = res.environment
    assert env["GPU"] and env["FlushBytes"] >= 2 * env["L2Bytes"] > 0


def test_graph_replay_kernels_are_attributed(plugin_host: Any, torch: Any) -> None:
    x = torch.randn(1 << 16, device="cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y = x * 2
        y.add_(1)
        y.mul_(3)

    @nsightx.analyze.kernel(runs=3, backend="cupti", combine_kernel_metrics=operator.add, verbosity=SILENT)
    def replay() -> None:
        x.normal_()
        with nsightx.annotate("replay"):
            g.replay()

    res = replay()
    for reg in _regions(res):
        assert reg.attributes["kernel_count"] == 3
        assert reg.attributes["graph_kernels"] == 3


def test_second_stream_and_other_thread(plugin_host: Any, torch: Any) -> None:
    side = torch.cuda.Stream()

    @nsightx.analyze.kernel(runs=3, backend="cupti", combine_kernel_metrics=operator.add, verbosity=SILENT)
    def work() -> None:
        x = torch.randn(1 << 16, device="cuda")
        with nsightx.annotate("streams"):
            y = x * 2
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                x + 1
            torch.cuda.current_stream().wait_stream(side)
        with nsightx.annotate("threaded"):
            y.add_(1)
            t = threading.Thread(target=lambda: y.mul_(2))
            t.start()
            t.join()
        y.neg_()  # after every region: never counted

    res = work()
    for reg in _regions(res):
        assert reg.attributes["kernel_count"] == 2, reg
        if reg.annotation == "streams":
            assert reg.attributes["streams"] == 2
        else:
            assert reg.attributes["other_thread_kernels"] == 1


def test_cache_flush_makes_a_cache_resident_kernel_slower(plugin_host: Any, torch: Any) -> None:
    x = torch.randn(4 << 20, device="cuda")  # 16 MiB: fits in the H200's 60 MiB L2

    def make(cache: str) -> Any:
        @nsightx.analyze.kernel(runs=10, backend="cupti", cache_control=cache, verbosity=SILENT)
        def scale() -> None:
            with nsightx.annotate("scale"):
                x.mul_(1.0)

        return scale

    cold = statistics.median(r.value for r in make("all")().records)
    warm = statistics.median(r.value for r in make("none")().records)
    assert cold > warm * 1.05, (cold, warm)


def test_switching_backends_in_one_process(plugin_host: Any, torch: Any) -> None:
    a = torch.randn(2048, 2048, device="cuda")

    def make() -> Any:
        @nsightx.analyze.kernel(runs=5, verbosity=SILENT)
        def mm() -> None:
            with nsightx.annotate("mm"):
                a @ a

        return mm

    values = {}
    for tool in (nsightx.Tool.CUPTI, nsightx.Tool.EVENTS, nsightx.Tool.CUPTI):
        nsightx.activate(tool)
        try:
            res = make()()
        finally:
            nsightx.deactivate()
        assert res.backend == tool.value
        values.setdefault(tool.value, []).append(statistics.median(r.value for r in res.records))
    cupti_1, cupti_2 = values["cupti"]
    assert abs(cupti_1 - cupti_2) / cupti_1 < 0.05
    assert values["events"][0] >= 0.95 * cupti_1  # a span on the stream is never shorter than its kernel


def test_auto_picks_cupti_for_a_plain_kernel_time(plugin_host: Any, torch: Any) -> None:
    @nsightx.analyze.kernel(runs=2, verbosity=SILENT)
    def tiny() -> None:
        x = torch.ones(16, device="cuda")
        with nsightx.annotate("tiny"):
            x.add_(1)

    assert tiny().backend == "cupti"


def test_flush_buffer_is_kept_between_sessions_and_can_be_released(torch: Any) -> None:
    from nsightx_cupti import _session

    first = _session.CudaDevice(0, flush=True)
    ptr = first.buffer.ptr if first.buffer else 0
    first.close()
    second = _session.CudaDevice(0, flush=True)
    assert second.buffer is not None and second.buffer.ptr == ptr  # reused, not allocated again
    second.flush_l2()
    second.synchronize()
    second.close()
    free_before = torch.cuda.mem_get_info()[0]
    _session.release_flush_buffers()
    assert _session._buffers == {}
    assert torch.cuda.mem_get_info()[0] >= free_before + 2 * second.l2_bytes - (1 << 20)


def test_quiet_apis_are_learned_and_launches_still_attributed(plugin_host: Any, torch: Any) -> None:
    from nsightx_cupti._tracer import ActivityTracer

    @nsightx.analyze.kernel(
        configs=[(256,), (2048,)], runs=3, backend="cupti", verbosity=SILENT, combine_kernel_metrics=operator.add
    )
    def mm(n: int) -> None:
        a = torch.randn(n, n, device="cuda")
        with nsightx.annotate("matmul"):
            a @ a

    first, second = mm(), mm()
    assert ActivityTracer.get().quiet.off  # torch's cudaGetDevice & co. were switched off
    assert second.environment["CuptiPerRun_records"] <= first.environment["CuptiPerRun_records"]
    counts = [{reg.config: reg.attributes["kernel_count"] for reg in _regions(res)} for res in (first, second)]
    assert counts[0] == counts[1] and min(counts[0].values()) >= 1  # every launch still found its region


@pytest.mark.parametrize("drain", ["off", "end", "config", "wait", "period"])
def test_every_drain_mode_measures_every_kernel_of_the_sweep(plugin_host: Any, torch: Any, drain: str) -> None:
    """Issue 13's sweep shape: every mode gets every kernel of every run once; the drain modes drained."""
    res = _matmul_sweep(torch, (512, 1024, 2048, 4096), {"cupti_drain": drain})
    counts = _kernel_counts(res)
    assert len(counts) == 40 and all(c >= 1 for c in counts.values())
    assert len(res.records) == sum(counts.values())
    assert all(r.value > 0 for r in res.records)
    env = res.environment
    assert env["CuptiDrain"] == drain
    assert (env["CuptiDrains"] > 0) == (drain not in ("off", "period"))  # period: CUPTI's thread, no drain of ours


@pytest.mark.parametrize("decode", ["ctypes", "cupti-python"])
def test_the_default_flush_after_the_wait_delivers_every_kernel_without_a_forced_one(
    plugin_host: Any, torch: Any, decode: str
) -> None:
    """``cupti_flush="complete"`` (the default): after the wait CUPTI's default flush hands back every buffer, so no
    forced flush follows, and the regions get the kernels a forced flush gives them."""
    from nsightx_cupti._tracer import ActivityTracer

    def sweep(flush: str) -> tuple[dict[tuple[int, int], int], dict[str, float]]:
        res = _matmul_sweep(torch, (512, 1024, 2048), {"cupti_flush": flush, "cupti_decode": decode})
        assert all(r.value > 0 for r in res.records)
        return _kernel_counts(res), dict(ActivityTracer.get().stats)

    forced, _ = sweep("forced")
    complete, stats = sweep("complete")
    assert complete == forced and len(complete) == 30
    assert stats.get("forced_after_default", 0) == 0 and stats.get("forced_at_stop", 0) == 0, stats


def test_ctypes_decoder_reads_what_cupti_python_reads(plugin_host: Any, torch: Any) -> None:
    """The ctypes decoder (the default) and cupti-python's record objects give the same kernels, ids and times.

    Graph replays and a second thread are in it, so the graph ids, node ids and thread ids read at their offsets
    are used by attribution; a wrong offset would show as other kernel counts, attribution or absurd times.
    """
    x = torch.randn(1 << 16, device="cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y = x * 2
        y.add_(1)
    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")

    def measure(decode: str) -> Any:
        @nsightx.analyze.kernel(
            runs=5,
            backend="cupti",
            backend_options={"cupti_decode": decode},
            combine_kernel_metrics=operator.add,
            verbosity=SILENT,
        )
        def work() -> None:
            with nsightx.annotate("mm"):
                a @ b
            with nsightx.annotate("graph"):
                g.replay()
            with nsightx.annotate("threaded"):
                t = threading.Thread(target=lambda: y.mul_(2))
                t.start()
                t.join()

        return work()

    by = {d: measure(d) for d in ("cupti-python", "ctypes")}
    assert by["ctypes"].environment["CuptiDecoder"] == "ctypes"
    assert by["cupti-python"].environment["CuptiDecoder"] == "cupti-python"
    seen = {}
    for d, res in by.items():
        regs = _regions(res)
        seen[d] = sorted(
            (
                reg.annotation,
                reg.attributes["kernel_count"],
                reg.attributes.get("graph_kernels", 0),
                reg.attributes.get("other_thread_kernels", 0),
            )
            for reg in regs
        )
        assert all(r.value > 0 for r in res.records)
    assert seen["ctypes"] == seen["cupti-python"]
    assert ("graph", 2, 2, 0) in seen["ctypes"] and ("threaded", 1, 0, 1) in seen["ctypes"]
    med = {d: statistics.median(r.value for r in res.records if r.annotation == "mm") for d, res in by.items()}
    assert 0.8 < med["ctypes"] / med["cupti-python"] < 1.25, med
    names = {d: sorted({r.kernel for r in res.records}) for d, res in by.items()}
    assert names["ctypes"] == names["cupti-python"]


def test_learn_mode_gates_outside_launches_and_finds_every_region_kernel(plugin_host: Any, torch: Any) -> None:
    """``api_tracing="learn"``: once the launches outside the regions are learned, their launch API is recorded
    only inside regions, and every region still gets exactly the kernels it gets with ``"always"``."""
    from nsightx_cupti._tracer import ActivityTracer

    side = torch.cuda.Stream()

    def make(tracing: str) -> Any:
        @nsightx.analyze.kernel(
            configs=[(512,), (1024,)],
            runs=4,
            backend="cupti",
            combine_kernel_metrics=operator.add,
            verbosity=SILENT,
            backend_options={"api_tracing": tracing},
        )
        def work(n: int) -> None:
            a = torch.randn(n, n, device="cuda")  # two launches outside every region per run
            b = torch.randn(n, n, device="cuda")
            with nsightx.annotate("matmul"):
                a @ b
            with nsightx.annotate("streams"):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    a.add_(1)
                torch.cuda.current_stream().wait_stream(side)
                t = threading.Thread(target=lambda: b.mul_(2))
                t.start()
                t.join()

        return work

    def counts(res: Any) -> dict[tuple[str, int], set[int]]:
        out: dict[tuple[str, int], set[int]] = {}
        for reg in _regions(res):
            out.setdefault((reg.annotation, reg.config), set()).add(reg.attributes["kernel_count"])
        return out

    plain = make("always")
    plain()  # the quiet APIs of this function are learned
    first = plain()
    always = counts(first)
    learn = make("learn")
    learn()  # learns the outside launches
    tracer = ActivityTracer.get()
    assert tracer.gate.keys, "torch.randn's launch API was not learned"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the gated outside kernels, left without a launch record, are no warning
        gated = learn()
    assert counts(gated) == always and always[("streams", 0)] == {2}
    assert gated.environment["CuptiGatedApis"] >= 1
    # no launch record for the two outside kernels of each run
    assert gated.environment["CuptiPerRun_records"] <= first.environment["CuptiPerRun_records"] - 1.5
