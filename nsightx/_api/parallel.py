"""Spreading a sweep over several GPUs: one worker process per device, configs handed out one at a time.

Each worker is a spawned process pinned to its GPU with CUDA_VISIBLE_DEVICES (set before anything in it
touches CUDA), so a config never shares its GPU with another measurement. The parent keeps a queue of
configs; one thread per device hands the next config to that device's worker as soon as it is free, so
fast and slow configs balance out. Workers return complete results (as JSON), which are merged into one
result whose ``Device`` column names the GPU of every row. With ``output_prefix`` the parent reserves its tag
before any worker starts (as a single-process call does), appends each config's runs to its raw file as the
config comes back, and each worker writes its own raw records as it goes, under ``<prefix>dev<k>_``, so a crash
keeps what was measured.

The function is shipped with cloudpickle, so functions defined in ``__main__`` or a notebook work.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from nsightx._api.mainguard import check_child, check_parent
from nsightx._errors import BackendUnavailableError, ConfigError, MeasurementError
from nsightx._results.output import OutputLocation, allocate
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.results import ProfileResults, build_results
from nsightx._results.schema import RawHeader, ResultData
from nsightx._results.sink import RunSink
from nsightx._run import device as _device
from nsightx._run.device import GpuInfo
from nsightx._spec.options import ProfileSpec

Worker = Callable[..., ProfileResults]
"""A profiled function as a worker calls it: ``worker(configs=[config])`` returns a one-config result."""


@dataclass(frozen=True)
class ParallelCall:
    """What the API layer hands the parallel path about one call (the backend already chosen)."""

    name: str
    """The profiled function's name."""
    spec: ProfileSpec
    """Its validated options (``parallel_devices`` set)."""
    backend: str
    """The backend every worker measures with."""
    needs_gpu: bool
    """Whether that backend measures a GPU (workers are then pinned to one each)."""


def _pin(cuda_visible: str | None) -> None:
    """Worker initializer: choose the GPU before any CUDA library loads."""
    if cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible


def _measure(payload: bytes) -> str:
    """In the worker: profile one config and return the result as JSON."""
    import cloudpickle

    profiled, config = cloudpickle.loads(payload)
    return str(profiled(configs=[config]).data.model_dump_json())


def _targets(spec_devices: Sequence[int | str] | str, needs_gpu: bool) -> list[tuple[str, str | None]]:
    """(label, CUDA_VISIBLE_DEVICES value) per worker."""
    if not needs_gpu:  # CPU backends: workers are still separate processes, one per listed "device"
        if spec_devices == "all":
            raise ConfigError("parallel_devices='all' needs a GPU backend; list worker ids instead")
        return [(f"{d}:cpu", None) for d in spec_devices]
    gpus = _device.visible()
    chosen: list[GpuInfo] = gpus if spec_devices == "all" else [_device.resolve(d, gpus) for d in spec_devices]
    if not chosen:
        raise BackendUnavailableError("parallel_devices='all' found no visible GPU")
    if len({g.uuid for g in chosen}) != len(chosen):
        raise ConfigError(f"parallel_devices names the same GPU twice: {[g.label for g in chosen]}")
    return [(g.label, g.uuid) for g in chosen]


def run_parallel(
    call: ParallelCall, configs: tuple[tuple[Any, ...], ...], make_worker: Callable[[ProfileSpec], Worker]
) -> ProfileResults:
    """Measure ``configs`` with one worker per device of ``call.spec.parallel_devices`` and merge.

    Args:
        call: The call: its function's name, spec and backend.
        configs: The resolved configs, handed out one at a time.
        make_worker: Builds the profiled function a worker runs, from its spec (one device, no
            ``parallel_devices``); it is shipped to the worker with cloudpickle.

    Raises:
        ConfigError: the main script calls this at its top level without a ``__main__`` guard (each spawned
            worker would run it again), or the devices are not usable.
        MeasurementError: a config failed in its worker, or a worker died.
    """
    check_child(call.name)
    check_parent(call.name)
    try:
        import cloudpickle
    except ImportError as e:
        raise BackendUnavailableError("parallel_devices needs cloudpickle: pip install cloudpickle") from e
    spec = call.spec
    assert spec.parallel_devices is not None
    targets = _targets(spec.parallel_devices, call.needs_gpu)
    location = None if spec.output_prefix is None else allocate(spec.output_prefix, call.name)
    feeder = _Feeder(configs, _RawWriter(location, configs), cloudpickle.dumps)
    threads = [
        threading.Thread(target=feeder.feed, args=(label, vis, make_worker(_worker_spec(call, k))), daemon=True)
        for k, (label, vis) in enumerate(targets)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        feeder.raw.close()
    if feeder.errors:
        raise feeder.errors[0]
    return _merge(call.spec, configs, [feeder.results[i] for i in range(len(configs))], location)


def _worker_spec(call: ParallelCall, k: int) -> ProfileSpec:
    """The spec worker ``k`` measures with: one device, the chosen backend, its own raw file prefix."""
    spec = call.spec
    prefix = None if spec.output_prefix is None else f"{_folder(spec.output_prefix)}dev{k}_"
    return spec.model_copy(
        update={"parallel_devices": None, "device": None, "backend": call.backend, "output_prefix": prefix}
    )


class _Feeder:
    """Hands configs out to workers, one at a time, and keeps what comes back (one thread per device)."""

    def __init__(self, configs: tuple[tuple[Any, ...], ...], raw: _RawWriter, dumps: Callable[[object], bytes]) -> None:
        self.configs = configs
        self.raw = raw
        self.dumps = dumps
        self.work: queue.Queue[int] = queue.Queue()
        for i in range(len(configs)):
            self.work.put(i)
        self.results: dict[int, tuple[str, str]] = {}
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()
        self.ctx = multiprocessing.get_context("spawn")

    def feed(self, label: str, cuda_visible: str | None, remote: Worker) -> None:
        """In one thread per device: run configs in that device's worker until none is left or one failed."""
        with cf.ProcessPoolExecutor(1, mp_context=self.ctx, initializer=_pin, initargs=(cuda_visible,)) as pool:
            while not self.errors:
                try:
                    i = self.work.get_nowait()
                except queue.Empty:
                    return
                try:
                    text = pool.submit(_measure, self.dumps((remote, self.configs[i]))).result()
                except BaseException as e:
                    hint = _DIED if isinstance(e, BrokenProcessPool) else ""
                    with self.lock:
                        self.errors.append(
                            MeasurementError(f"config {i} {self.configs[i]!r} failed on device {label}: {e}{hint}")
                        )
                    return
                with self.lock:
                    self.results[i] = (label, text)
                    self.raw.add(i, text)


class _RawWriter:
    """The parent's raw file: a header from the first config that comes back, then each config's runs."""

    def __init__(self, location: OutputLocation | None, configs: tuple[tuple[Any, ...], ...]) -> None:
        self.location = location
        self.configs = configs
        self.sink: RunSink | None = None

    def add(self, config: int, text: str) -> None:
        """Append the runs of the one-config result ``text`` as config ``config`` of the sweep."""
        if self.location is None:
            return
        data = ResultData.model_validate_json(text)
        if self.sink is None:
            plan = data.plan.model_copy(update={"configs": self.configs})
            self.sink = RunSink(
                self.location.raw,
                RawHeader(
                    sweep=self.location.sweep,
                    nsightx_version=data.nsightx_version,
                    created=data.created,
                    host=str(data.environment.get("Host")),
                    plan=plan,
                ),
            )
        for run in _shift(data, config):
            self.sink.write(run)

    def close(self) -> None:
        """Close the file, if one was opened."""
        if self.sink is not None:
            self.sink.close()


_DIED = (
    " (its worker process died; if the worker printed that the script needs an "
    '`if __name__ == "__main__":` guard, add one around the code that runs the sweep)'
)


def _folder(prefix: str) -> str:
    """A folder prefix keeps its trailing separator so that ``dev<k>_`` lands inside the folder."""
    if os.path.isdir(prefix) and not prefix.endswith(("/", "\\")):
        return prefix + os.sep
    return prefix


def _shift(data: ResultData, config: int) -> list[RunRecords]:
    """The runs of a one-config result, its config index 0 renumbered as ``config``."""

    def rec(r: Record) -> Record:
        return r.model_copy(update={"config": config})

    def reg(r: RegionRun) -> RegionRun:
        return r.model_copy(update={"config": config})

    def col(c: CollectorValue) -> CollectorValue:
        return c if c.config is None else c.model_copy(update={"config": config})

    return [
        r.model_copy(
            update={
                "config": config if r.config >= 0 else r.config,
                "records": tuple(rec(x) for x in r.records),
                "regions": tuple(reg(x) for x in r.regions),
                "collectors": tuple(col(x) for x in r.collectors),
            }
        )
        for r in data.runs
    ]


def _merge(
    spec: ProfileSpec,
    configs: tuple[tuple[Any, ...], ...],
    parts: list[tuple[str, str]],
    location: OutputLocation | None,
) -> ProfileResults:
    """One result of the whole sweep from the workers' one-config results, built like a one-process one."""
    runs: list[RunRecords] = []
    first: ResultData | None = None
    devices: list[str] = []
    for i, (label, text) in enumerate(parts):
        data = ResultData.model_validate_json(text)
        first = first or data
        runs += _shift(data, i)
        devices.append(label)
    assert first is not None
    environment = dict(first.environment)
    environment["Devices"] = ",".join(dict.fromkeys(devices))
    if location is not None:
        environment["raw_data"] = str(location.raw)
        environment["sweep"] = location.sweep
    return build_results(
        first.plan.model_copy(update={"configs": configs}),
        runs,
        environment,
        combine=spec.combine_kernel_metrics,
        derive_metric=spec.derive_metric,
        configs=configs,
        created=first.created,
        nsightx_version=first.nsightx_version,
        config_devices=tuple(devices),
        location=location,
        output_csv=spec.output_csv,
    )
