"""The user API's implementation, the top stage.

The ``analyze.kernel`` decorator, ``activate``/``Tool``, ``analyze.plot``, the first-run check and the
spreading of configs over worker processes. It may import every stage below it: spec, host, run, results,
plot, report.
"""
