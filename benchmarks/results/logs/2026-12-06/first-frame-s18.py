"""A fresh process (pandas, pyarrow imported): one deferred host call (frame_stages.host_call), then its first
to_dataframe(), imports included. Argument: none | import | frame (what is done before it). Session 18."""
import sys, time
sys.path.insert(0, "benchmarks")
import pandas, pyarrow
import frame_stages as fs
make = fs.host_call()
mode = sys.argv[1]
r = make()
if mode == "import":
    t0 = time.perf_counter_ns()
    import nsightx._results.dataframe, nsightx._results.framebuild, nsightx._results.table_flags, nsightx._results.groupstats  # noqa
    print("import %.0f us" % ((time.perf_counter_ns() - t0) / 1e3))
elif mode == "frame":
    w = make()
    t0 = time.perf_counter_ns(); w.to_dataframe(); print("warm frame %.0f us" % ((time.perf_counter_ns() - t0) / 1e3))
t0 = time.perf_counter_ns(); r.to_dataframe(); t1 = time.perf_counter_ns()
print(mode, "first to_dataframe %.0f us" % ((t1 - t0) / 1e3))
