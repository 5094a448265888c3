"""``nsight.InfoCollector`` built the nsight-python way: its callback gets nsight-python's arguments.

nsight-python's ``InfoCollector(name, callback, scope)`` calls ``callback()`` at ONCE scope and
``callback(*config)`` (ANNOTATION: ``callback(annotation, *config)``) otherwise, and its ``collect(*args)`` calls
the callback with the arguments given. NVIDIA's own tests (``tests/test_info_collector.py``) and the class's
docstring use both. Before this, nsightx handed such a callback one ``CollectContext``: the profiled call warned
and left the column empty, and ``collect(10, 20)`` raised ``TypeError``.
"""

from __future__ import annotations

import warnings

import nsightx as nsight
from nsightx import CollectionScope, InfoCollector


def test_collect_takes_nsight_pythons_arguments() -> None:
    assert InfoCollector("O", lambda: "v", CollectionScope.ONCE).collect() == "v"
    assert InfoCollector("C", lambda x, y: x + y, CollectionScope.CONFIG).collect(10, 20) == 30
    assert InfoCollector("S", lambda *a: sum(a), CollectionScope.CONFIG).collect(1, 2, 3, 4, 5) == 15
    assert InfoCollector("R", lambda v: v * 2, CollectionScope.RUN).collect(21) == 42
    assert InfoCollector("N", lambda v: [v], CollectionScope.RUN).collect(None) == [None]


def _version() -> str:
    return "555.42"


def _sum(*args: int) -> int:
    return sum(args)


def _size(m: int, n: int) -> int:
    return m * n


def _tag(annotation: str, *args: int) -> str:
    return f"{annotation}_{args[0]}"


def test_profiled_call_gives_nsight_python_collectors_their_values() -> None:
    configs = [(2, 3), (4, 5)]

    @nsight.analyze.kernel(
        configs=configs,
        runs=2,
        backend="host",
        info_collectors=[
            InfoCollector("Driver", _version, CollectionScope.ONCE),
            InfoCollector("Sum", _sum, CollectionScope.CONFIG),
            InfoCollector("Size", _size, CollectionScope.RUN),
            InfoCollector("Tag", _tag, CollectionScope.ANNOTATION),
            InfoCollector("Fn", lambda ctx: ctx.function, CollectionScope.ONCE),
        ],
    )
    def sweep(m: int, n: int) -> None:
        with nsight.annotate("region"):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a collector that raised would warn
        df = sweep().to_dataframe().sort_values("m")
    # The naive reference: what nsight-python's collectors return, computed by hand per config.
    assert df["Driver"].tolist() == ["555.42", "555.42"]
    assert df["Sum_Min"].tolist() == [m + n for m, n in configs]
    assert df["Size_Max"].tolist() == [m * n for m, n in configs]
    assert df["Tag"].tolist() == [f"region_{m}" for m, _ in configs]
    assert df["Fn"].tolist() == ["sweep", "sweep"]  # nsightx's context form is unchanged


def test_signature_decides_the_form_unless_told() -> None:
    assert InfoCollector("a", _version, "once").legacy_args
    assert InfoCollector("b", _size, "run").legacy_args
    assert InfoCollector("c", _sum, "config").legacy_args
    assert not InfoCollector("d", lambda ctx: 1, "run").legacy_args
    assert not InfoCollector("e", lambda ctx, extra=2: 1, "run").legacy_args
    assert InfoCollector("f", lambda ctx: 1, "run", legacy_args=True).legacy_args
    assert not InfoCollector("g", _size, "run", legacy_args=False).legacy_args
