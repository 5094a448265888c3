"""Pure attribution: which CUPTI kernel record belongs to which annotated region, and the records it yields.

Nothing here touches CUPTI or a GPU. The tracer copies each activity record into one of the small value types
below; :func:`attribute` decides, for every kernel, the region it belongs to; :func:`to_run_output` turns that
into nsightx records. The same functions run on the H200 and, in CI, on activity captured there and committed
under ``tests/fixtures/cupti`` (:func:`batch_to_json` / :func:`batch_from_json`).

Attribution is by identity, in this order:

1. **External id.** On ``region_enter`` the session pushes a fresh external correlation id on the opening
   thread's CUPTI stack. CUPTI then writes an EXTERNAL_CORRELATION record linking the id to the correlation id of
   every traced launch API called on that thread while it is pushed. A kernel carries its launch's correlation
   id, so kernel -> launch -> external id -> region is exact. This covers plain launches, kernels on other
   streams and ``cudaGraphLaunch`` (every kernel of a replayed graph carries the graph launch's correlation id).
2. **Launch window (other threads).** The id stack is per thread, so a kernel launched by another thread has no
   external id. If its launch API record started while a region was open (host timestamps taken with
   ``cupti.get_timestamp`` on enter and exit, the clock API records use), it belongs to that region.

A kernel that matches neither was launched outside every region (input setup, the L2 flush) and is not
counted.
"""

from __future__ import annotations

import bisect
import json
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from nsightx.ext import RegionId, RunOutput, Scalar, new_record
from nsightx_cupti._names import METRIC, kernel_base_name

FIXTURE_SCHEMA = 1
"""Version of the JSON written by :func:`batch_to_json`."""


class KernelActivity(NamedTuple):
    """The fields of a CUPTI CONCURRENT_KERNEL record that attribution and the records need.

    A named tuple, because one is built per kernel inside CUPTI's buffer callback, where construction cost counts.
    """

    name: str
    """Kernel name as CUPTI reports it (usually mangled)."""
    start: int
    """GPU start timestamp, ns, in CUPTI's clock."""
    end: int
    """GPU end timestamp, ns."""
    correlation_id: int
    """Correlation id of the API call that launched it (the graph launch, for a graph node)."""
    stream_id: int = 0
    """CUPTI stream id."""
    device_id: int = 0
    """Device ordinal."""
    context_id: int = 0
    """CUPTI context id."""
    graph_id: int = 0
    """Id of the graph it ran in; 0 when launched directly."""
    graph_node_id: int = 0
    """Id of its graph node; 0 when launched directly."""

    @property
    def duration(self) -> int:
        """End minus start, ns."""
        return self.end - self.start


class ApiActivity(NamedTuple):
    """The fields of a CUPTI RUNTIME or DRIVER API record used by the other-thread rule (a named tuple, as above)."""

    correlation_id: int
    """Correlation id of the call."""
    start: int
    """Host timestamp when the call began, ns."""
    end: int
    """Host timestamp when it returned, ns."""
    thread_id: int = 0
    """CUPTI thread id of the caller."""
    cbid: int = 0
    """Callback id (which API)."""
    domain: str = "runtime"
    """``runtime`` or ``driver``."""


@dataclass(slots=True, unsafe_hash=True)
class RegionWindow:
    """One execution of a region as the session saw it: its external id and its host window.

    Never changed once made, but not ``frozen``: the session makes one at every region exit, on the measured path,
    and a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) took ~0.84 us there against ~0.16 us
    (2-core VM); hashed by its fields as a frozen one is. Not a named tuple either: attribution reads its fields
    after the GPU wait, and a slot is read faster than a named tuple's field or unpacked item (Python 3.11).
    """

    external_id: int
    """The external correlation id pushed while it was open."""
    annotation: str
    """Annotation name."""
    config: int
    """Config index."""
    run: int
    """Run index (negative for warm-up runs)."""
    enter_ns: int
    """CUPTI timestamp just before the id was pushed."""
    exit_ns: int
    """CUPTI timestamp just after the id was popped."""
    thread_id: int = 0
    """Python thread ident of the thread that opened it."""
    failed: bool = False
    """True when the region raised and the failure was ignored."""

    @property
    def region(self) -> RegionId:
        """The region's identity."""
        return RegionId.model_construct(annotation=self.annotation, config=self.config, run=self.run)


@dataclass(slots=True)
class ActivityBatch:
    """Activity delivered by one flush: kernels, launch API calls, and external correlations."""

    kernels: list[KernelActivity] = field(default_factory=list)
    """Kernel records, in delivery order."""
    apis: dict[int, ApiActivity] = field(default_factory=dict)
    """API records keyed by correlation id."""
    externals: dict[int, int] = field(default_factory=dict)
    """Correlation id -> external id (only the kind this backend pushes)."""

    def extend(self, other: ActivityBatch) -> None:
        """Append ``other``'s records to this batch."""
        self.kernels.extend(other.kernels)
        self.apis.update(other.apis)
        self.externals.update(other.externals)


class Attributed(NamedTuple):
    """A kernel placed in a region, and by which rule (a named tuple: one is built per kernel of a collection)."""

    kernel: KernelActivity
    """The kernel."""
    rule: str
    """``external`` (its launch carried the region's id) or ``window`` (launched by another thread)."""


@dataclass(slots=True)
class Attribution:
    """The outcome of :func:`attribute`."""

    by_region: dict[int, list[Attributed]]
    """External id of each window -> its kernels in launch order."""
    outside: int = 0
    """Kernels launched outside every region (not counted)."""
    untraced: list[KernelActivity] = field(default_factory=list)
    """Kernels with neither an external id of this run nor a launch API record: cannot be placed."""
    outside_apis: dict[tuple[str, int], int] = field(default_factory=dict)
    """Kernels placed outside every region by their launch record's time, per launching API ``(domain, cbid)``
    (counted only when :func:`attribute` is asked to)."""
    whole: bool | None = None
    """Whether every kernel placed in a region has a whole record (a start, an end not before it), as
    :func:`attribute` saw while placing them; None when not known (:func:`incomplete` then reads them all)."""


_SPAN = operator.attrgetter("enter_ns", "exit_ns", "external_id")
"""A window's host span and id, as :func:`attribute` bisects them."""
_FIRST = operator.itemgetter(0)


@dataclass(slots=True)
class Grouped:
    """A collection's windows grouped as :func:`attribute` and the run outputs read them (see :func:`group_windows`)."""

    count: int
    """How many windows were grouped (the first ones of the session's list: it only grows until taken)."""
    by_region: dict[int, list[Attributed]]
    """External id of each window -> an empty list, for :func:`attribute` to fill (once)."""
    spans: list[tuple[int, int, int]]
    """Each window's host span and id, sorted (bisected by the launch-window rule)."""
    enters: list[int]
    """The sorted spans' enter times."""
    by_run: dict[Any, list[RegionWindow]]
    """The windows of each run, keyed (config, run), the finished runs first (for :func:`to_run_outputs`)."""


_UNSORTED: tuple[list[tuple[int, int, int]], list[int] | None] = ([], None)


def _spans(windows: Sequence[RegionWindow]) -> tuple[list[tuple[int, int, int]], list[int]]:
    """The windows' host spans and ids, sorted, and their enter times (bisected as ints, not as tuples)."""
    spans = list(map(_SPAN, windows))  # map of a C getter: no Python step per window
    spans.sort()  # the windows come in order: one comparison each
    return spans, list(map(_FIRST, spans))


def group_windows(windows: Sequence[RegionWindow], finished: Iterable[tuple[int, int]]) -> Grouped:
    """Group ``windows`` (of the runs ``finished``) before their kernels are known.

    A deferred session does it before its wait for the GPU: it reads no record, so it is done while the GPU still
    works (~15 us for the 44 windows of a sweep, on a 2-core CPU) and not after the wait, where :func:`attribute`
    and :func:`to_run_outputs` would otherwise group them.
    """
    by_run: dict[Any, list[RegionWindow]] = {key: [] for key in finished}
    for w in windows:
        by_run.setdefault((w.config, w.run), []).append(w)
    by_region: dict[int, list[Attributed]] = {w.external_id: [] for w in windows}
    return Grouped(len(windows), by_region, *_spans(windows), by_run)


def attribute(
    batch: ActivityBatch, windows: Sequence[RegionWindow], *, count_outside: bool = False, ahead: Grouped | None = None
) -> Attribution:
    """Assign every kernel of ``batch`` to at most one of ``windows``.

    This runs after the GPU wait, on every kernel of a collection, so it does one dict lookup per kernel in the
    common case (the launch carried an id of this collection) and sorts the host windows only when a kernel needs
    the launch-window rule.

    Args:
        batch: The activity of one run (any order).
        windows: The regions opened during that run; their host windows do not overlap (regions don't nest).
        count_outside: Also count the kernels placed outside by their launch record per launching API
            (:attr:`Attribution.outside_apis`, for ``api_tracing="learn"``; off, it costs nothing per kernel).
        ahead: ``windows`` grouped already (:func:`group_windows`, its lists still empty); None: grouped here.

    Returns:
        The kernels of each region sorted by launch (correlation id, then GPU start), what was left out, and
        whether every placed kernel's record is whole (:attr:`Attribution.whole`, which :func:`incomplete` reads).
    """
    by_region = ahead.by_region if ahead is not None else {w.external_id: [] for w in windows}
    spans, enters = (ahead.spans, ahead.enters) if ahead is not None else _UNSORTED  # sorted when needed
    result = Attribution(by_region=by_region)
    externals, apis = batch.externals, batch.apis
    new = tuple.__new__  # Attributed's own constructor is a Python function: ~2x slower
    outside, whole = 0, True  # whole: every kernel placed so far has a whole record
    for k in batch.kernels:
        corr = k[3]  # correlation_id: a named tuple's field by index costs less than by name
        ext = externals.get(corr)
        if ext is not None:
            own = by_region.get(ext)
            if own is not None:
                own.append(new(Attributed, (k, "external")))
                start = k[1]
                if start <= 0 or k[2] < start:  # an incomplete record (see :func:`incomplete`)
                    whole = False
                continue
        api = apis.get(corr)
        if api is None:
            if ext is None:
                result.untraced.append(k)
            else:
                outside += 1  # carries an id of an earlier run: launched by a stale stack entry
            continue
        if enters is None:
            spans, enters = _spans(windows)
        t = api[1]  # its start: the window that opened last at or before the launch, if still open then
        i = bisect.bisect_right(enters, t) - 1
        if i >= 0 and t <= spans[i][1]:
            by_region[spans[i][2]].append(new(Attributed, (k, "window")))
            if k[1] <= 0 or k[2] < k[1]:
                whole = False
            continue
        outside += 1
        if count_outside:
            key = (api.domain, api.cbid)
            result.outside_apis[key] = result.outside_apis.get(key, 0) + 1
    result.outside, result.whole = outside, whole
    _sort_by_launch(by_region)
    return result


def _sort_by_launch(by_region: dict[int, list[Attributed]]) -> None:
    """Put each region's kernels in launch order (see :func:`_launch_order`), in place."""
    for kernels in by_region.values():
        n = len(kernels)
        if n == 2:  # the split-K region: one comparison, where a sort costs a key call per kernel on top
            if kernels[0][0][3] < kernels[1][0][3]:  # the correlation ids, by index (a field by name is a call)
                continue
            if _launch_order(kernels[1]) < _launch_order(kernels[0]):
                kernels.reverse()
        elif n > 2:
            kernels.sort(key=_launch_order)


def _launch_order(a: Attributed) -> tuple[int, int, int]:
    """Sort key of a region's kernels: launch (correlation id), then GPU start, then graph node."""
    k = a.kernel
    return k.correlation_id, k.start, k.graph_node_id


_MAX = 1 << 63
NAN = math.nan
_START = operator.itemgetter(KernelActivity._fields.index("start"))
_END = operator.itemgetter(KernelActivity._fields.index("end"))


def silent_launches(
    batch: ActivityBatch,
    windows: Sequence[RegionWindow],
    attribution: Attribution,
    launches_kernels: Callable[[ApiActivity], bool],
) -> list[tuple[RegionWindow, int]]:
    """Regions whose own thread made kernel launch calls but that got no kernel record at all.

    After a synchronise and the flush every kernel launched has its record, so such a region means the
    kernel records went elsewhere (another CUPTI client switched the kind off or took the callbacks).

    Args:
        batch: The activity of the collected runs.
        windows: Their regions.
        attribution: What :func:`attribute` made of them.
        launches_kernels: Whether an API record is a call that always launches a kernel.

    Returns:
        Each such window with the number of its launch calls.
    """
    silent = {w.external_id for w in windows if not w.failed and not attribution.by_region.get(w.external_id)}
    if not silent:  # the common case: every region got its kernels, nothing to count
        return []
    launches: dict[int, int] = {}
    for corr, ext in batch.externals.items():
        if ext in silent:
            api = batch.apis.get(corr)
            if api is not None and launches_kernels(api):
                launches[ext] = launches.get(ext, 0) + 1
    return [
        (w, launches[w.external_id])
        for w in windows  # a failed region's launch may have failed too
        if w.external_id in silent and launches.get(w.external_id)
    ]


def region_attributes(window: RegionWindow, kernels: Sequence[Attributed]) -> dict[str, Scalar]:
    """Cheap facts about one region execution, stored beside its values.

    ``device_ns`` is the sum of its kernel durations, ``span_ns`` first start to last end, ``launch_ns`` the
    host time between open and close (CUPTI clock), and ``launch_bound`` is true when the host took longer to
    issue the work than the GPU took to run it (the GPU idled waiting for launches).
    """
    host_ns = window.exit_ns - window.enter_ns
    if len(kernels) == 1:  # the common region: no loop, no set
        ((k, rule),) = kernels
        duration = k.end - k.start
        return {
            "kernel_count": 1,
            "device_ns": duration,
            "span_ns": duration,
            "launch_ns": host_ns,
            "launch_bound": host_ns > duration,
            "streams": 1,
            "graph_kernels": 1 if k.graph_id else 0,
            "other_thread_kernels": 1 if rule == "window" else 0,
        }
    if len(kernels) == 2:  # the split-K region: no loop, no set either
        return _two_kernels(host_ns, kernels)
    device_ns = graph_kernels = other_thread = 0
    first, last = _MAX, -_MAX
    streams: set[int] = set()
    for k, rule in kernels:  # one pass: this runs for every region of a collection, after the GPU wait
        start, end = k.start, k.end
        device_ns += end - start
        if start < first:
            first = start
        if end > last:
            last = end
        streams.add(k.stream_id)
        if k.graph_id:
            graph_kernels += 1
        if rule == "window":
            other_thread += 1
    return {
        "kernel_count": len(kernels),
        "device_ns": device_ns,
        "span_ns": last - first if kernels else 0,
        "launch_ns": host_ns,
        "launch_bound": bool(kernels) and host_ns > device_ns,
        "streams": len(streams),
        "graph_kernels": graph_kernels,
        "other_thread_kernels": other_thread,
    }


def _two_kernels(host_ns: int, kernels: Sequence[Attributed]) -> dict[str, Scalar]:
    """:func:`region_attributes` of a region with two kernels (the same values, read without a loop)."""
    (a, rule_a), (b, rule_b) = kernels
    _, a_start, a_end, _, a_stream, _, _, a_graph, _ = a  # one unpack each: fewer steps than four fields by name
    _, b_start, b_end, _, b_stream, _, _, b_graph, _ = b
    device_ns = (a_end - a_start) + (b_end - b_start)
    return {
        "kernel_count": 2,
        "device_ns": device_ns,
        "span_ns": (a_end if a_end >= b_end else b_end) - (a_start if a_start <= b_start else b_start),
        "launch_ns": host_ns,
        "launch_bound": host_ns > device_ns,
        "streams": 1 if a_stream == b_stream else 2,
        "graph_kernels": (1 if a_graph else 0) + (1 if b_graph else 0),
        "other_thread_kernels": (1 if rule_a == "window" else 0) + (1 if rule_b == "window" else 0),
    }


def to_run_output(
    attribution: Attribution, windows: Sequence[RegionWindow], metrics: Sequence[str] = (METRIC,)
) -> RunOutput:
    """Turn an attribution into one record per (region, kernel, metric) plus per-region attributes.

    A failed region gets no records: the core reports it as NaN.

    Args:
        attribution: The result of :func:`attribute`.
        windows: The same windows that were attributed.
        metrics: Metrics asked for; only :data:`METRIC` is known here.
    """
    return to_run_outputs(attribution, {None: list(windows)}, metrics)[None]


def to_run_outputs(
    attribution: Attribution,
    windows: Mapping[Any, Sequence[RegionWindow]],
    metrics: Sequence[str] = (METRIC,),
    *,
    rows: bool = False,
) -> dict[Any, RunOutput]:
    """:func:`to_run_output` for several runs at once (keyed like ``windows``).

    The records are built directly (:func:`~nsightx.ext.new_record`, of values made here): this runs after the
    session's wait for the GPU, on the measured path of the whole call, where validating them cost more than
    building them and the dataclass constructor ~40% more than the builder. With ``rows``, each run's records are
    handed over as :data:`~nsightx.ext.RecordRow` tuples in ``RunOutput.record_rows`` instead (the same fields; the
    run loop makes a :class:`~nsightx.ext.Record` of one only when something asks for it), a tenth of the
    builder's cost per record. Each distinct kernel name is shortened once per call. A region of one kernel (the
    common one) or two (cuBLAS's split-K) is read without a loop: a one-kernel region's attributes are written in
    :func:`_outputs` (:func:`region_attributes`' values, in its order), a two-kernel one's by :func:`_two_kernels`.
    """
    return _outputs(attribution.by_region, windows, METRIC in metrics, rows)


def _outputs(
    by_region: Mapping[int, list[Attributed]], windows: Mapping[Any, Sequence[RegionWindow]], want: bool, rows: bool
) -> dict[Any, RunOutput]:
    """:func:`to_run_outputs` of :attr:`Attribution.by_region` (``want``: the metric was asked for; see there)."""
    outputs: dict[Any, RunOutput] = {}
    names: dict[str, str] = {}  # each distinct kernel name is shortened once per call
    for key, ws in windows.items():
        records: list[Any] = []
        attributes: dict[str, dict[str, Scalar]] = {}
        add = records.append
        for w in ws:
            kernels = by_region.get(w.external_id, _NONE)
            annotation, n, host_ns = w.annotation, len(kernels), w.exit_ns - w.enter_ns
            if n == 1:
                (((name, start, end, _, _, _, _, graph, _), rule),) = kernels  # one unpack: not the fields by name
                duration = end - start
                attributes[annotation] = {
                    "kernel_count": 1,
                    "device_ns": duration,
                    "span_ns": duration,
                    "launch_ns": host_ns,
                    "launch_bound": host_ns > duration,
                    "streams": 1,
                    "graph_kernels": 1 if graph else 0,
                    "other_thread_kernels": 1 if rule == "window" else 0,
                }
                if not (w.failed or not want):
                    value = float(duration) if end >= start > 0 else NAN
                    add((annotation, w.config, w.run, names.get(name) or _short(names, name), METRIC, value, "ns", 0))
            elif n == 2:  # the split-K region: its records without a loop
                attributes[annotation] = _two_kernels(host_ns, kernels)
                if not (w.failed or not want):
                    (a, _), (b, _) = kernels
                    a_name, a_start, a_end = a[0], a[1], a[2]
                    b_name, b_start, b_end = b[0], b[1], b[2]
                    a_value = float(a_end - a_start) if a_end >= a_start > 0 else NAN
                    b_value = float(b_end - b_start) if b_end >= b_start > 0 else NAN
                    a_short = names.get(a_name) or _short(names, a_name)
                    b_short = names.get(b_name) or _short(names, b_name)
                    add((annotation, w.config, w.run, a_short, METRIC, a_value, "ns", 0))
                    add((annotation, w.config, w.run, b_short, METRIC, b_value, "ns", 1))
            else:
                attributes[annotation] = region_attributes(w, kernels)
                if not (w.failed or not want):
                    _add_records(add, w, kernels, names)
        outputs[key] = RunOutput([], attributes, records) if rows else _objects(records, attributes)
    return outputs


def _objects(records: list[Any], attributes: dict[str, dict[str, Scalar]]) -> RunOutput:
    """A run's output with its record rows made :class:`~nsightx.ext.Record` objects (``rows=False``)."""
    return RunOutput([new_record(*r) for r in records], attributes)


def _add_records(
    add: Callable[[Any], None], w: RegionWindow, kernels: Sequence[Attributed], names: dict[str, str]
) -> None:
    """Append the record rows of region execution ``w``'s ``kernels``, a ``seq`` each in their order."""
    annotation, config, run = w.annotation, w.config, w.run
    for seq, (k, _) in enumerate(kernels):
        start, end, name = k.start, k.end, k.name
        value = float(end - start) if end >= start > 0 else NAN
        add((annotation, config, run, names.get(name) or _short(names, name), METRIC, value, "ns", seq))


def _short(names: dict[str, str], name: str) -> str:
    """``name`` shortened (:func:`kernel_base_name`), kept in ``names``: each distinct kernel name once per call."""
    short = names[name] = kernel_base_name(name)
    return short


_NONE: tuple[Attributed, ...] = ()
"""The kernels of a region none was attributed to."""


def incomplete(attribution: Attribution, batch: ActivityBatch) -> KernelActivity | None:
    """The first kernel placed in a region whose record is incomplete (no start, or an end before it), else None.

    "First" in the order of :attr:`Attribution.by_region`. In the common collection none is incomplete, and
    nothing is read: :func:`attribute` checked each kernel it placed (:attr:`Attribution.whole`). An attribution
    that does not say has the batch's kernels scanned first, without a lookup per region and without a
    Python-level step per kernel (``map`` of C functions: a generator expression cost ~4x as much).
    """
    if attribution.whole:
        return None
    collected = batch.kernels
    starts = list(map(_START, collected))
    if min(starts, default=1) > 0 and not any(map(operator.gt, starts, map(_END, collected))):
        return None
    for kernels in attribution.by_region.values():
        for a in kernels:
            k = a.kernel
            if k.start <= 0 or k.end < k.start:
                return k
    return None


# --- fixtures --------------------------------------------------------------------------------------------


def batch_to_json(batch: ActivityBatch, windows: Sequence[RegionWindow], meta: Mapping[str, Any]) -> str:
    """Serialise one run's activity and windows (the format of ``tests/fixtures/cupti/*.json``)."""
    doc = {
        "schema": FIXTURE_SCHEMA,
        "meta": dict(meta),
        "windows": [asdict(w) for w in windows],
        "kernels": [k._asdict() for k in batch.kernels],
        "apis": [a._asdict() for a in sorted(batch.apis.values(), key=lambda a: a.correlation_id)],
        "externals": [[c, e] for c, e in sorted(batch.externals.items())],
    }
    return json.dumps(doc, indent=1)


def batch_from_json(text: str) -> tuple[ActivityBatch, list[RegionWindow], dict[str, Any]]:
    """Read what :func:`batch_to_json` wrote.

    Raises:
        ValueError: the document has another schema version.
    """
    doc = json.loads(text)
    if doc.get("schema") != FIXTURE_SCHEMA:
        raise ValueError(f"CUPTI fixture schema {doc.get('schema')!r}; this code reads {FIXTURE_SCHEMA}")
    batch = ActivityBatch(
        kernels=[KernelActivity(**k) for k in doc["kernels"]],
        apis={a["correlation_id"]: ApiActivity(**a) for a in doc["apis"]},
        externals={int(c): int(e) for c, e in doc["externals"]},
    )
    windows = [RegionWindow(**w) for w in doc["windows"]]
    return batch, windows, dict(doc.get("meta", {}))


def filter_batch(batch: ActivityBatch, keep_correlations: Iterable[int]) -> ActivityBatch:
    """A copy of ``batch`` holding only the records of the given correlation ids (to trim fixtures)."""
    keep = set(keep_correlations)
    return ActivityBatch(
        kernels=[k for k in batch.kernels if k.correlation_id in keep],
        apis={c: a for c, a in batch.apis.items() if c in keep},
        externals={c: e for c, e in batch.externals.items() if c in keep},
    )
