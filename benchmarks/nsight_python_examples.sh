#!/usr/bin/env bash
# Run NVIDIA's nsight-python examples (its examples/ folder with test_examples.py, fetched separately and kept out
# of this repository) through nsightx, all in one pytest process: a tiny `nsight` package that *is* nsightx
# (sys.modules["nsight"] = nsightx) goes first on PYTHONPATH, so `import nsight` in the examples gets nsightx.
# Usage (GPU machine, nsightx importable):  bash benchmarks/nsight_python_examples.sh EXAMPLES_DIR LOG [pytest args]
set -u
src=$(cd "$1" && pwd); log=$2; shift 2
work=$(mktemp -d)
cp -r "$src" "$work/examples"
. "$(dirname "$0")/nsight_shim.sh"  # nsight_shim: the `nsight` package that is nsightx
nsight_shim "$work/shim"
cd "$work" || exit 1
{
  echo "# nsight-python examples through nsightx ($(date -u)); examples from github NVIDIA/nsight-python"
  PYTHONPATH="$work/shim:$work:${PYTHONPATH:-}" python3 -c "import nsight, nsightx; assert nsight is nsightx; print('nsight ->', nsight.__file__)"
  PYTHONPATH="$work/shim:$work:${PYTHONPATH:-}" timeout "${EXAMPLES_TIMEOUT:-420}" python3 -m pytest -v -rA -p no:cacheprovider \
    examples/test_examples.py "$@"
  echo "pytest rc=$?"
  ls -la examples/ | grep -E '\.(png|csv|ncu-rep|log)$'
} 2>&1 | tee "$log"
