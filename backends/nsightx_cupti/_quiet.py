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
records per run to ~8 from the second collection on (98c9cf0:benchmarks/results/2026-12-02-cupti-api-filter-probe.json).

Never switched off: an API whose name contains ``Launch``, an API whose name the installed cupti-python does not
know, and an API whose record carried the correlation id of a kernel.

:class:`LaunchGate` learns the other way round, for ``api_tracing="learn"``: which launch APIs launch kernels
outside the regions often enough that they are better recorded only while a region is open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

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


class LaunchGate:
    """Which launch APIs to record only while a region is open (``api_tracing="learn"``), learned per process.

    A function that launches kernels outside its regions (``torch.randn`` of its inputs in every run) makes CUPTI
    write a launch API record for each of them, which is decoded and placed by its time after the wait for the
    GPU, only to be left out (decoding alone took ~1.65 us per record on the H200's host in session 10's flush
    probe). Switching that launch API off outside regions leaves such a kernel only its kernel record, which
    attribution drops at once (no external id, no launch record), for two per-API switches per region (~0.64 us
    each in session 10's H200 call timeline: 16 switches, 10.2 us).

    So after each collection: a launch API that launched at least one kernel per region outside every region is
    gated from the next session on. The gated APIs stay gated while collections keep seeing at least one kernel
    per region with no record to place it by (what the gated launches leave); otherwise they are recorded again,
    and learned anew from the next collection.
    """

    def __init__(self) -> None:
        self.keys: set[ApiKey] = set()
        """APIs to gate at the next session's start."""

    def learn(self, outside_apis: dict[ApiKey, int], unplaced: int, regions: int, gated: Iterable[ApiKey]) -> None:
        """Update :attr:`keys` from one collection.

        Args:
            outside_apis: Kernels placed outside every region by their launch record, per launching API.
            unplaced: Kernels with neither an external id nor a launch record.
            regions: Regions of the collection.
            gated: The APIs gated while it was recorded.
        """
        if regions <= 0:
            return
        kept = set(gated) if unplaced >= regions else set()
        self.keys = kept | {key for key, n in outside_apis.items() if n >= regions}
