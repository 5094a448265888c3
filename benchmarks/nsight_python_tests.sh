#!/usr/bin/env bash
# Run NVIDIA's nsight-python unit tests (its tests/ folder, fetched separately and kept out of this repository)
# through nsightx: a tiny `nsight` package that *is* nsightx (sys.modules["nsight"] = nsightx) goes first on
# PYTHONPATH, so `import nsight` in their tests gets nsightx. Each test file runs in its own pytest process
# (test_cuda_init_before_nsight.py initialises CUDA at import; one file's import must not change another's).
# Their run_api_params.py is a helper of test_api_params.py, not a test file.
# NSP_TESTS_ACTIVATE=ncu makes the shim call nsightx.activate(nsightx.Tool.NCU) first, as nsight-python always
# runs ncu ("auto" picks CUPTI for a plain time, so tests that look for .ncu-rep files need it).
# Usage (GPU machine, nsightx, torch and cuda-core importable):
#   bash benchmarks/nsight_python_tests.sh TESTS_DIR LOG [pytest args]
# docs/compat.md ("nsight-python's own tests") has the CPU outcome of every test and why.
set -u
src=$(cd "$1" && pwd); log=$2; shift 2
work=$(mktemp -d)
cp -r "$src" "$work/tests"
. "$(dirname "$0")/nsight_shim.sh"  # nsight_shim: the `nsight` package that is nsightx
nsight_shim "$work/shim" activate
cd "$work" || exit 1
export PYTHONPATH="$work/shim:$work/tests:${PYTHONPATH:-}"
{
  echo "# nsight-python's tests through nsightx ($(date -u)); tests from github NVIDIA/nsight-python;" \
    "NSP_TESTS_ACTIVATE=${NSP_TESTS_ACTIVATE:-}"
  python3 -c "import nsight, nsightx; assert nsight is nsightx; print('nsight ->', nsight.__file__)"
  for f in tests/test_*.py; do
    echo "## $f"
    timeout "${NSP_TESTS_TIMEOUT:-300}" python3 -m pytest -v -rA -p no:cacheprovider "$f" "$@"
    echo "pytest $f rc=$?"
  done
} 2>&1 | tee "$log"
