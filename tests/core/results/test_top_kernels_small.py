"""The ``Kernel`` column of a small result, found over Python ints, is the numpy path's (issue 35).

``_top_kernels`` names, per group, the kernel with the most successful rows, the first met on a tie. Up to
``_SMALL`` combinations the counts run over Python ints (:func:`_few_top_kernels`); random tables of combinations
(kernels shared between groups, ``failed`` ones, ties) must get the same names as the numpy path.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results import dataframe

_COMBO = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 3))
"""A combination: its group, its kernel (code 3 names ``failed`` where the kernels include it), its rows."""


def _table(combos: list[tuple[int, int, int]], with_failed: bool) -> tuple[Any, Any]:
    """A table of the combinations' rows in order, and its groups (numbered as the combinations give them)."""
    kernels = ["gemm", "fill", "copy", "failed" if with_failed else "reduce"]
    combo = np.repeat(np.arange(len(combos), dtype=np.int64), [r for _, _, r in combos])
    first = np.concatenate([[0], np.cumsum([r for _, _, r in combos])[:-1]]).astype(np.int64)
    group_of_combo = np.array([g for g, _, _ in combos], dtype=np.int64)
    table = SimpleNamespace(
        kernels=kernels,
        combinations=SimpleNamespace(
            ids=combo, first=first, kernel=np.array([k for _, k, _ in combos], dtype=np.int64)
        ),
    )
    return table, SimpleNamespace(ids=group_of_combo[combo], count=4)


@settings(max_examples=300, deadline=None)
@given(combos=st.lists(_COMBO, min_size=1, max_size=12), with_failed=st.booleans())
def test_few_combinations_get_the_numpy_paths_kernels(combos: list[tuple[int, int, int]], with_failed: bool) -> None:
    table, groups = _table(combos, with_failed)
    few = dataframe._top_kernels(table, groups).tolist()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dataframe, "_SMALL", -1)
        assert few == dataframe._top_kernels(table, groups).tolist()


def test_a_tie_goes_to_the_kernel_met_first() -> None:
    table, groups = _table([(0, 1, 2), (0, 0, 1), (0, 0, 1), (1, 3, 2)], with_failed=True)
    assert dataframe._few_top_kernels(table, groups, np.full(4, "failed", dtype=object), 3).tolist() == [
        "fill",
        "failed",
        "failed",
        "failed",
    ]
