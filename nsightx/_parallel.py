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
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from nsightx._device import GpuInfo
from nsightx._errors import BackendUnavailableError, ConfigError, MeasurementError
from nsightx._mainguard import check_child, check_parent
from nsightx._output import OutputLocation, allocate
from nsightx._records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._result_schema import RawHeader, ResultData
from nsightx._results import ProfileResults
from nsightx._sink import RunSink
from nsightx._transform import RunValue

if TYPE_CHECKING:
    from nsightx._kernel import ProfiledFunction


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
    from nsightx import _device

    gpus = _device.visible()
    chosen: list[GpuInfo] = gpus if spec_devices == "all" else [_device.resolve(d, gpus) for d in spec_devices]
    if not chosen:
        raise BackendUnavailableError("parallel_devices='all' found no visible GPU")
    if len({g.uuid for g in chosen}) != len(chosen):
        raise ConfigError(f"parallel_devices names the same GPU twice: {[g.label for g in chosen]}")
    return [(g.label, g.uuid) for g in chosen]


def run_parallel(profiled: ProfiledFunction, configs: tuple[tuple[Any, ...], ...], backend: str) -> ProfileResults:
    """Measure ``configs`` with one worker per device of ``profiled.spec.parallel_devices`` and merge.

    Raises:
        ConfigError: the main script calls this at its top level without a ``__main__`` guard (each spawned
            worker would run it again), or the devices are not usable.
        MeasurementError: a config failed in its worker, or a worker died.
    """
    check_child(profiled.name)
    check_parent(profiled.name)
    try:
        import cloudpickle
    except ImportError as e:
        raise BackendUnavailableError("parallel_devices needs cloudpickle: pip install cloudpickle") from e
    from nsightx._plugins import default_host

    spec = profiled.spec
    needs_gpu = default_host().backend(backend).capabilities.needs_gpu
    assert spec.parallel_devices is not None
    targets = _targets(spec.parallel_devices, needs_gpu)
    ctx = multiprocessing.get_context("spawn")
    work: queue.Queue[int] = queue.Queue()
    for i in range(len(configs)):
        work.put(i)
    results: dict[int, tuple[str, str]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    location = None if spec.output_prefix is None else allocate(spec.output_prefix, profiled.name)
    raw = _RawWriter(location, configs)

    def feed(k: int, label: str, cuda_visible: str | None) -> None:
        from nsightx._kernel import ProfiledFunction

        prefix = None if spec.output_prefix is None else f"{_folder(spec.output_prefix)}dev{k}_"
        worker_spec = spec.model_copy(
            update={"parallel_devices": None, "device": None, "backend": backend, "output_prefix": prefix}
        )
        remote = ProfiledFunction(profiled.fn, worker_spec, None)
        with cf.ProcessPoolExecutor(1, mp_context=ctx, initializer=_pin, initargs=(cuda_visible,)) as pool:
            while not errors:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    text = pool.submit(_measure, cloudpickle.dumps((remote, configs[i]))).result()
                except BaseException as e:
                    hint = _DIED if isinstance(e, BrokenProcessPool) else ""
                    with lock:
                        errors.append(
                            MeasurementError(f"config {i} {configs[i]!r} failed on device {label}: {e}{hint}")
                        )
                    return
                with lock:
                    results[i] = (label, text)
                    raw.add(i, text)

    threads = [
        threading.Thread(target=feed, args=(k, label, vis), daemon=True) for k, (label, vis) in enumerate(targets)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        raw.close()
    if errors:
        raise errors[0]
    return _merge(profiled, configs, [results[i] for i in range(len(configs))], location)


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
        for run in _shift(data, config)[0]:
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


def _shift(data: ResultData, config: int) -> tuple[list[RunRecords], list[RunValue]]:
    """Renumber a one-config result's config index 0 as ``config``."""

    def rec(r: Record) -> Record:
        return r.model_copy(update={"config": config})

    def reg(r: RegionRun) -> RegionRun:
        return r.model_copy(update={"config": config})

    def col(c: CollectorValue) -> CollectorValue:
        return c if c.config is None else c.model_copy(update={"config": config})

    runs = [
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
    values = [v.model_copy(update={"config": config}) for v in data.values]
    return runs, values


def _merge(
    profiled: ProfiledFunction,
    configs: tuple[tuple[Any, ...], ...],
    parts: list[tuple[str, str]],
    location: OutputLocation | None,
) -> ProfileResults:
    runs: list[RunRecords] = []
    values: list[RunValue] = []
    first: ResultData | None = None
    devices: list[str] = []
    for i, (label, text) in enumerate(parts):
        data = ResultData.model_validate_json(text)
        first = first or data
        r, v = _shift(data, i)
        runs += r
        values += v
        devices.append(label)
    assert first is not None
    plan = first.plan.model_copy(update={"configs": configs})
    environment = dict(first.environment)
    environment["Devices"] = ",".join(dict.fromkeys(devices))
    if location is not None:
        environment["raw_data"] = str(location.raw)
        environment["sweep"] = location.sweep
    merged = ResultData(
        nsightx_version=first.nsightx_version,
        created=first.created,
        plan=plan,
        environment=environment,
        runs=tuple(runs),
        values=tuple(values),
        config_devices=tuple(devices),
    )
    results = ProfileResults(merged, configs)
    if location is not None:
        results.write_outputs(location, profiled.spec.output_csv)
    return results
