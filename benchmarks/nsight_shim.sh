# Sourced by nsight_python_tests.sh and nsight_python_examples.sh (not run on its own): defines nsight_shim, which
# writes the tiny `nsight` package that *is* nsightx (sys.modules["nsight"] = nsightx), so that `import nsight` in
# NVIDIA's nsight-python tests and examples gets nsightx once DIR is first on PYTHONPATH.
# Usage: nsight_shim DIR [activate]
#   DIR       the folder to create DIR/nsight/__init__.py in
#   activate  also honour NSP_TESTS_ACTIVATE=ncu (nsightx.activate(nsightx.Tool.NCU) at import), as the tests
#             script does; without it the shim never activates a tool, whatever the environment holds.
nsight_shim() {
  mkdir -p "$1/nsight"
  {
    printf '%s\n' '"""`import nsight` gives nsightx itself, so nsight-python code runs unchanged on nsightx."""'
    if [ "${2:-}" = activate ]; then printf '%s\n' 'import os'; fi
    printf '%s\n' 'import sys' '' 'import nsightx' ''
    if [ "${2:-}" = activate ]; then
      printf '%s\n' 'if os.environ.get("NSP_TESTS_ACTIVATE") == "ncu":' '    nsightx.activate(nsightx.Tool.NCU)'
    fi
    printf '%s\n' 'sys.modules[__name__] = nsightx'
  } > "$1/nsight/__init__.py"
}
