"""nsightx_env: the software a measurement was taken with (first-party plugin ``env``).

Registers the collector set ``env``, **enabled by name**: ``info_collectors=["env"]`` on the decorator, or
``NSIGHTX_COLLECTORS=env`` for every call. It is off by default because it adds a dozen columns to every row
and its first call runs ``ncu --version`` (about a second) and git.

Once per call: ``PythonVersion``, ``NsightxVersion``, ``TorchVersion``, ``TritonVersion``, ``JaxVersion``,
``CuptiPythonVersion`` (``None`` when not installed; read from package metadata, never imported),
``CudaDriverVersion`` (what the driver supports), ``CudaRuntimeVersion``, ``CuptiVersion`` (the
``nvidia-cuda-cupti`` package), ``NcuVersion``, ``Platform``, ``GitCommit`` and ``GitDirty`` (of the current
directory's work tree). The host name is already in every row as ``Host``.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import TYPE_CHECKING

from nsightx.ext import CollectContext, CollectionScope, Scalar, hookimpl

if TYPE_CHECKING:
    from nsightx.ext import CollectorRegistrar

SET_NAME = "env"
COLUMNS = (
    "PythonVersion",
    "NsightxVersion",
    "TorchVersion",
    "TritonVersion",
    "JaxVersion",
    "CuptiPythonVersion",
    "CudaDriverVersion",
    "CudaRuntimeVersion",
    "CuptiVersion",
    "NcuVersion",
    "Platform",
    "GitCommit",
    "GitDirty",
)


class EnvInfo:
    """ONCE: versions of Python, nsightx, the GPU stack and ncu; platform; git commit of the working directory."""

    name = "env"
    scope = CollectionScope.ONCE
    columns = COLUMNS

    def collect(self, ctx: CollectContext) -> Mapping[str, Scalar]:
        """Look everything up (see the module docstring)."""
        from nsightx import __version__
        from nsightx_env import _probe

        values: dict[str, Scalar] = {"PythonVersion": platform.python_version(), "NsightxVersion": __version__}
        for column, dists in _probe.PACKAGES:
            values[column] = _probe.dist_version(dists)
        values["CudaDriverVersion"] = _probe.cuda_driver_version()
        values["CudaRuntimeVersion"] = _probe.cuda_runtime_version()
        values["CuptiVersion"] = _probe.dist_version(_probe.CUPTI_DISTS)
        values["NcuVersion"] = _probe.ncu_version(_probe.find_ncu())
        values["Platform"] = platform.platform()
        values["GitCommit"], values["GitDirty"] = _probe.git_state()
        return values


@hookimpl
def nsightx_register_collectors(register: CollectorRegistrar) -> None:
    """Register the ``env`` set (used when named)."""
    register(SET_NAME, [EnvInfo()], default=False)
