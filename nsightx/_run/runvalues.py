"""A collector's answer that the run loop keeps as it is: values many runs share, and one value of the run's own.

Why: the nvml RUN collector's answer before each run is the latest sample of a background sampler, the same five
values for every run until a new sample is published, and the sample's age, the one value that differs. Copied
into a new mapping and turned into six rows before every run, it cost several microseconds between two launches
(issue 35). Returned as a :class:`RunValues`, the shared mapping is not copied: the run loop converts its values
once for all the runs that share it (``_shared_columns`` in :mod:`nsightx._run.loop`) and adds the run's own
value, as rows, or, for a run it keeps in a run block, as two columns of names and values.

A :class:`RunValues` is a read-only :class:`~collections.abc.Mapping` too, so a caller that does not know it (a
proxy asking for one value at a time) reads it as the plain mapping it stands for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from nsightx._results.records import Scalar


class RunValues(Mapping[str, Scalar]):
    """The values ``shared`` (not copied: they must not change once returned) and ``name`` = ``value``.

    As a mapping it holds the keys of ``shared`` in their order, then ``name`` (whose value is ``value``, also
    when ``shared`` has that key as well). The run loop turns it into the same rows as that plain mapping.

    Args:
        shared: Values many answers may share (the same object for every run that has them).
        name: The key of this answer's own value.
        value: This answer's own value.

    Example:
        >>> sample = {"Temperature": 41, "Clock": 1980}
        >>> dict(RunValues(sample, "AgeMs", 0.25))
        {'Temperature': 41, 'Clock': 1980, 'AgeMs': 0.25}
    """

    __slots__ = ("name", "shared", "value")

    def __init__(self, shared: Mapping[str, Scalar], name: str, value: Scalar) -> None:
        self.shared = shared
        self.name = name
        self.value = value

    def __getitem__(self, key: str) -> Scalar:
        if key == self.name:
            return self.value
        return self.shared[key]

    def __iter__(self) -> Iterator[str]:
        name = self.name
        yield from (k for k in self.shared if k != name)
        yield name

    def __len__(self) -> int:
        return len(self.shared) + (self.name not in self.shared)

    def __repr__(self) -> str:
        return f"RunValues({dict(self)!r})"
