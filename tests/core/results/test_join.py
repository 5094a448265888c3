"""The time/counter join on records captured on the H200: kernels matched by region, launch order and name."""

from __future__ import annotations

import pytest
from _paths import FIXTURES
from _synthetic import cupti_fixture_runs
from nsightx_cupti._attribution import batch_from_json
from nsightx_cupti._names import kernel_base_name

from nsightx import ConfigError
from nsightx._api.counters import joined_results
from nsightx._results.flags import parse_cell
from nsightx._results.join import JoinError, base_name, join_runs
from nsightx._results.profileresults import build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo

CUPTI = FIXTURES / "cupti"
TIME = "gpu__time_duration.sum"
FLOPS = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
BYTES = "dram__bytes.sum"


def cupti_runs(name="splitk_512", runs=5):
    return cupti_fixture_runs(name, runs)


def counter_runs(kernels, runs=2, annotation="matmul", ncu_time=True):
    """ncu-shaped runs: per kernel its own time and two counters, names as ncu writes them."""
    out = []
    for r in range(runs):
        recs = []
        for seq, k in enumerate(kernels):
            recs.append(
                Record(
                    annotation=annotation,
                    config=0,
                    run=r,
                    kernel=k,
                    metric=FLOPS,
                    value=1e6 * (seq + 1),
                    unit="inst",
                    seq=seq,
                )
            )
            recs.append(
                Record(annotation=annotation, config=0, run=r, kernel=k, metric=BYTES, value=3e6, unit="byte", seq=seq)
            )
            if ncu_time:
                recs.append(
                    Record(
                        annotation=annotation, config=0, run=r, kernel=k, metric=TIME, value=99e3, unit="ns", seq=seq
                    )
                )
        regions = (
            RegionRun(annotation=annotation, config=0, run=r, host_ns=10**9, attributes={"kernel_count": len(kernels)}),
        )
        out.append(RunRecords(config=0, run=r, records=tuple(recs), regions=regions))
    return out


def splitk_names():
    return [rec.kernel for rec in cupti_runs(runs=1)[0].records]


def test_split_k_counters_attach_to_their_kernel_by_launch_order():
    names = splitk_names()
    assert len(names) == 2 and "split_k" in names[1]  # what the H200 launched for an fp32 matmul at n=512
    joined = join_runs(cupti_runs(), counter_runs(names))
    assert joined.regions_joined == 1
    assert joined.sources == {TIME: "cupti", FLOPS: "ncu", BYTES: "ncu"}
    run0 = joined.runs[0]
    by = {(rec.metric, rec.seq): rec for rec in run0.records}
    assert by[(FLOPS, 0)].kernel == names[0] and by[(FLOPS, 0)].value == 1e6
    assert by[(FLOPS, 1)].kernel == names[1] and by[(FLOPS, 1)].value == 2e6
    assert by[(TIME, 0)].value != 99e3  # ncu's own time is left out: the time column is CUPTI's
    assert len(joined.runs) == 5 and not any(rec.metric == FLOPS for rec in joined.runs[4].records)
    assert joined.runs[0].regions == cupti_runs()[0].regions  # the time side's regions and attributes stay


def test_a_region_whose_kernel_count_differs_is_an_error_not_a_join():
    names = splitk_names()
    with pytest.raises(
        JoinError,
        match=r"'matmul' of config 0: the kernel count differs.*cupti saw 2 kernel.*"
        r"ncu run 0 saw 1 kernel",
    ):
        join_runs(cupti_runs(), counter_runs(names[:1]))


def test_same_count_other_names_is_an_error():
    names = splitk_names()
    with pytest.raises(JoinError, match="kernel names differ"):
        join_runs(cupti_runs(), counter_runs([names[1], names[0]]))  # swapped launch order


def test_one_counter_run_that_differs_is_enough_to_refuse():
    names = splitk_names()
    runs = counter_runs(names, runs=3)
    runs[2] = counter_runs(names[:1], runs=3)[2]
    with pytest.raises(JoinError, match="ncu run 2 saw 1 kernel"):
        join_runs(cupti_runs(), runs)


def test_region_only_on_the_counter_side_and_too_many_counter_runs():
    with pytest.raises(JoinError, match=r"never saw"):
        join_runs(cupti_runs(), counter_runs(["k"], annotation="other"))
    with pytest.raises(JoinError, match="beyond the cupti runs"):
        join_runs(cupti_runs(runs=2), counter_runs(splitk_names(), runs=3))


def test_counters_measured_over_the_whole_region_are_refused_not_dropped():
    """ncu's range replay writes one record per region (kernel ``"range"``): no kernel to attach it to.

    Found by hunt21m: the join skipped such records, and the joined result lacked the counters with no word.
    """
    with pytest.raises(JoinError, match=r"cannot join '.*' of region 'matmul' of config 0: ncu measured it over"):
        join_runs(cupti_runs(), counter_runs(["range"], ncu_time=False))
    whole = counter_runs(splitk_names())
    whole[1] = counter_runs(["region"], runs=2)[1]  # one run of a backend without kernel records is enough
    with pytest.raises(JoinError, match=r"kernel 'region'"):
        join_runs(cupti_runs(), whole)


def test_base_name_matches_cupti_and_ncu_spellings():
    batch, _windows, _ = batch_from_json((CUPTI / "two_regions.json").read_text())
    mangled = next(k.name for k in batch.kernels if "vectorized_elementwise_kernel" in k.name)
    demangled = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float>>, std::array<char *, 2>>(int, T2, T3)"
    )
    assert base_name(kernel_base_name(mangled)) == base_name(demangled) == "vectorized_elementwise_kernel"
    assert base_name("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas") == (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas"
    )


def plan(backend, runs):
    return PlanInfo(
        function="mm",
        params=("n",),
        configs=((512,),),
        runs=runs,
        warmup=1,
        metrics=(TIME,),
        backend=backend,
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
    )


def test_joined_result_says_which_backend_measured_each_row():
    add = {"combine": lambda a, b: a + b}
    times = build_results(plan("cupti", 5), cupti_runs(), {"GPU": "NVIDIA H200"}, **add)
    counters = build_results(
        plan("ncu", 2), counter_runs(splitk_names()), {"GPU": "NVIDIA H200", "SerializesKernels": True}, **add
    )
    res = joined_results(times, counters, **add)
    assert res.backend == "cupti+ncu"
    assert res.data.plan.metric_backends == {TIME: "cupti", FLOPS: "ncu", BYTES: "ncu"}
    assert "MetricSources" not in res.environment  # a field of the plan, not an environment string
    df = res.to_dataframe().set_index("Metric")
    assert df.loc[TIME, "Tool"] == "cupti" and df.loc[FLOPS, "Tool"] == "ncu"
    per_run = res.runs_dataframe().groupby("Metric")["Tool"].unique().map(list).to_dict()
    assert per_run == {TIME: ["cupti"], FLOPS: ["ncu"], BYTES: ["ncu"]}
    assert df.loc[TIME, "NumRuns"] == 5 and df.loc[FLOPS, "NumRuns"] == 2
    assert df.loc[FLOPS, "AvgValue"] == pytest.approx(3e6)  # both kernels' counters, combined
    assert "few_runs" in parse_cell(df.loc[FLOPS, "Flags"])
    assert "serialized" not in parse_cell(df.loc[TIME, "Flags"])  # the times were not measured under replay
    assert "launch_bound" in parse_cell(df.loc[TIME, "Flags"])  # CUPTI's own verdict is kept


def test_a_time_metric_whose_every_region_failed_is_still_the_time_sides():
    # The time side was asked for the time and the bytes; every region failed, so no record names either. The
    # Tool of the time rows was the joined "cupti+ncu" (the sources came from records only), and the counter
    # side's bytes would have been joined as if the time side had not measured them.
    asked = plan("cupti", 1).model_copy(update={"metrics": (TIME, BYTES)})
    failed = RegionRun(annotation="matmul", config=0, run=0, host_ns=1, failed=True)
    times = build_results(asked, [RunRecords(config=0, run=0, regions=(failed,))], {})
    counters = build_results(plan("ncu", 1), [RunRecords(config=0, run=0, regions=(failed,))], {})
    res = joined_results(times, counters)
    assert res.data.plan.metric_backends == {TIME: "cupti", BYTES: "cupti"}
    assert set(res.to_dataframe()["Tool"]) == {"cupti"}
    timed = Record(annotation="matmul", config=0, run=0, kernel="gemm", metric=TIME, value=5.0, unit="ns", seq=0)
    joined = join_runs(
        [RunRecords(config=0, run=0, records=(timed,))], counter_runs(["gemm"], runs=1), time_metrics=(TIME, BYTES)
    )
    assert joined.sources == {TIME: "cupti", BYTES: "cupti", FLOPS: "ncu"}
    assert [r.metric for r in joined.runs[0].records] == [TIME, FLOPS]


def test_joined_results_refuse_other_configs():
    times = build_results(plan("cupti", 5), cupti_runs(), {}, combine=lambda a, b: a + b)
    other = plan("ncu", 2).model_copy(update={"configs": ((1024,),)})
    counters = build_results(other, counter_runs(splitk_names()), {}, combine=lambda a, b: a + b)
    with pytest.raises(ConfigError, match="configs differ"):
        joined_results(times, counters)


def test_joined_result_round_trips_with_its_sources(tmp_path):
    from nsightx import load

    add = {"combine": lambda a, b: a + b}
    times = build_results(plan("cupti", 5), cupti_runs(), {}, **add)
    counters = build_results(plan("ncu", 2), counter_runs(splitk_names()), {}, **add)
    saved = joined_results(times, counters, **add).save(tmp_path / "joined.json")
    df = load(saved).to_dataframe().set_index("Metric")
    assert df.loc[TIME, "Tool"] == "cupti" and df.loc[BYTES, "Tool"] == "ncu"


def test_base_name_of_templated_and_anonymous_namespace_kernels():
    """Spellings ncu gave on the H200 for torch's elementwise add and softmax (the join failed on them once)."""
    add = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
        "std::array<char *, (unsigned long)3>>(int, T2, T3)"
    )
    softmax = (
        "void (anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue, long, (int)4>(T3 *, const T1 *, T5)"
    )
    assert base_name(add) == "vectorized_elementwise_kernel"
    assert base_name(softmax) == "cunn_SoftMaxForwardReg"
    assert base_name("cunn_SoftMaxForwardReg") == "cunn_SoftMaxForwardReg"


def test_a_joined_result_saved_with_the_environment_string_reads_as_metric_backends(tmp_path):
    """A result saved before the field (d6b4a1c's fixture) keeps its per-metric backends when loaded."""
    from nsightx import load

    fixture = FIXTURES / "frames" / "synthetic.result.json"
    saved = tmp_path / "old.json"
    saved.write_bytes(fixture.read_bytes())
    res = load(saved)
    assert res.environment["MetricSources"] == "gpu__time_duration.sum=cupti;bytes=ncu"
    assert res.data.plan.metric_backends == {"gpu__time_duration.sum": "cupti", "bytes": "ncu"}
    assert dict(zip(res.to_dataframe()["Metric"], res.to_dataframe()["Tool"], strict=False)) == {
        "gpu__time_duration.sum": "cupti",
        "bytes": "ncu",
    }
