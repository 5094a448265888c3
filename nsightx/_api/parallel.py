"""``parallel_devices``: a sweep spread over the devices of this host, as a local executor of the one sweep path.

The devices named by ``parallel_devices`` become a :class:`~nsightx._remote.localpool.DevicePool` (one spawned worker
process per device, pinned with CUDA_VISIBLE_DEVICES), and the sweep runs through :func:`nsightx._api.sweep.run_sweep`
like any ``executor=`` sweep: configs handed out one at a time, each config's runs appended to the caller's raw
file as it comes back, one merged result whose ``Device`` column names the GPU of every row. The workers write
no files: each sends its config's runs back, and the caller's raw file (with ``output_prefix``) holds every config
that came back.

The function is shipped as it is to the ncu worker (:mod:`nsightx._remote.travel`), so functions defined in
``__main__`` or a notebook work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nsightx._api.mainguard import check_child, check_parent
from nsightx._api.sweep import SweepCall, run_sweep
from nsightx._errors import BackendUnavailableError, ConfigError
from nsightx._remote.engines import FuturesEngine
from nsightx._remote.localpool import DevicePool, Target
from nsightx._remote.task import Worker
from nsightx._results.profileresults import ProfileResults
from nsightx._run import device as _device
from nsightx._run.device import GpuInfo
from nsightx._spec.options import ProfileSpec


def _targets(spec: ProfileSpec, needs_gpu: bool) -> list[Target]:
    """One target per device of ``spec.parallel_devices``: its label and CUDA_VISIBLE_DEVICES."""
    devices = spec.parallel_devices
    assert devices is not None
    if not needs_gpu:  # CPU backends: workers are still separate processes, one per listed "device"
        if devices == "all":
            raise ConfigError("parallel_devices='all' needs a GPU backend; list worker ids instead")
        pairs: list[tuple[str, str | None]] = [(f"{d}:cpu", None) for d in devices]
    else:
        pairs = [(g.label, g.uuid) for g in _gpus(devices)]
    return [Target(label, visible) for label, visible in pairs]


def _gpus(devices: Sequence[int | str] | str) -> list[GpuInfo]:
    gpus = _device.visible()
    chosen: list[GpuInfo] = gpus if devices == "all" else [_device.resolve(d, gpus) for d in devices]
    if not chosen:
        raise BackendUnavailableError("parallel_devices='all' found no visible GPU")
    if len({g.uuid for g in chosen}) != len(chosen):
        raise ConfigError(f"parallel_devices names the same GPU twice: {[g.label for g in chosen]}")
    return chosen


def run_parallel(
    call: SweepCall, configs: tuple[tuple[Any, ...], ...], make_worker: Callable[[ProfileSpec], Worker]
) -> ProfileResults:
    """Measure ``configs`` with one worker per device of ``call.spec.parallel_devices`` and merge.

    Args:
        call: The call: its function, spec and backend.
        configs: The resolved configs, handed out one at a time.
        make_worker: Builds the profiled function a worker runs, from its spec (one device, no
            ``parallel_devices``); it travels to the worker with the task.

    Raises:
        ConfigError: the main script calls this at its top level without a ``__main__`` guard (each spawned
            worker would run it again), or the devices are not usable.
        SweepError: a config failed in its worker, or a worker died (the other configs were measured).
    """
    check_child(call.name)
    check_parent(call.name)
    try:
        import cloudpickle  # noqa: F401  (the function travels with it)
    except ImportError as e:
        raise BackendUnavailableError("parallel_devices needs cloudpickle: pip install cloudpickle") from e
    pool = DevicePool(_targets(call.spec, call.needs_gpu))
    try:
        return run_sweep(
            call, configs, make_worker, FuturesEngine(pool, call.needs_gpu, label="parallel_devices", owned=True)
        )
    finally:
        pool.shutdown(cancel_futures=True)
