"""Which runtime and driver APIs the tracer may stop recording: those it has seen launch nothing.

CUPTI's RUNTIME and DRIVER activity kinds record every API call, and frameworks make many calls that are not
launches: torch calls ``cudaGetDevice`` about forty times per matmul. Every record costs CUPTI time when it is
flushed and Python time when it is decoded, yet only launch records tie kernels to regions. libcupti 13.0 can
switch single APIs off (``cuptiActivityEnableRuntimeApi`` / ``...DriverApi``; it refuses only the ids of APIs
newer than itself), but switching all ~1,300 ids off and back on would cost about a millisecond per session.

So the tracer learns instead: after each collection it switches off the APIs that appeared in the records and
launched no kernel, and keeps that set for the rest of the process (switched off again when the next session
starts, a handful of calls: enabling the RUNTIME or DRIVER kind, as every start and every other client does,
overrides per-API settings, so a session's end leaves them to the next enabler).
On the H200 this takes a torch matmul loop from ~90 activity
records per run to ~8 from the second collection on (benchmarks/results/2026-12-02-cupti-api-filter-probe.json).

Never switched off: an API whose name contains ``Launch``, an API whose name the installed cupti-python does not
know, and an API whose record carried the correlation id of a kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from nsightx_cupti._attribution import ActivityBatch

ApiKey = tuple[str, int]
"""``(domain, cbid)``: domain ``runtime`` or ``driver``, cbid CUPTI's callback id of the API."""


class QuietApis:
    """The process's set of APIs switched off, and the rule that grows it.

    Args:
        name_of: The API's name for ``(domain, cbid)``, or None when unknown.
    """

    def __init__(self, name_of: Callable[[str, int], str | None]) -> None:
        self.name_of = name_of
        self.off: set[ApiKey] = set()
        """APIs to switch off while a session traces."""
        self.refused: set[ApiKey] = set()
        """APIs libcupti would not switch (not asked again)."""
        self.launching: set[ApiKey] = set()
        """APIs seen launching a kernel at least once (never switched off)."""

    def may_silence(self, key: ApiKey) -> bool:
        """True when ``key``'s name is known and is not a launch."""
        name = self.name_of(*key)
        return name is not None and "Launch" not in name

    def candidates(self, batch: ActivityBatch) -> list[ApiKey]:
        """APIs recorded in ``batch`` that launched none of its kernels and may be switched off, not yet off.

        Once every API of the batch is known (the usual case from the second collection of a process on), the
        kernels are not looked at: this runs after the GPU wait, and that loop was half its cost.
        """
        seen = {(api.domain, api.cbid) for api in batch.apis.values()}
        known = self.launching | self.off | self.refused
        if seen <= known:
            return []
        self.launching.update(
            (api.domain, api.cbid) for k in batch.kernels if (api := batch.apis.get(k.correlation_id)) is not None
        )
        fresh = seen - self.launching - self.off - self.refused
        return sorted(key for key in fresh if self.may_silence(key))
