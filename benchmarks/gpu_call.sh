python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
export PYTHONUNBUFFERED=1
timeout 300 python3 benchmarks/verdict_gpu.py --out $OUT/v1 --parts joined flags reconcile > $OUT/verdict-1.log 2>&1; echo "verdict 1 rc=$?"; tail -25 $OUT/verdict-1.log
timeout 150 python3 benchmarks/verdict_gpu.py --out $OUT/v2 --parts cost > $OUT/verdict-2.log 2>&1; echo "verdict 2 rc=$?"; tail -12 $OUT/verdict-2.log
timeout 80 python3 -m pytest -m gpu -q -p no:cacheprovider -p timeout --timeout 70 tests/test_verdict_gpu.py "tests/test_cupti_gpu.py::test_every_drain_mode_measures_every_kernel_of_the_sweep" > $OUT/gpu-tests-verdict.log 2>&1; tail -4 $OUT/gpu-tests-verdict.log
cd $OUT && tar czf verdict-files.tgz v1 v2 && cp v1/roofline.png . 2>/dev/null; cp v1/*.json v2/*.json . 2>/dev/null; rm -rf v1 v2; ls
