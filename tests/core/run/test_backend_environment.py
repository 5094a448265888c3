"""A backend's ``environment()`` that is no mapping of str keys to scalars is a named nsightx error; runs are kept.

Before, a list, dict or datetime value, a key that is no str, or ``None`` instead of a mapping failed the call in
the result's build with pydantic's ``ValidationError`` or a ``TypeError`` naming neither backend nor key. Now a
``PluginError`` names the backend, the key and the value's type, raised after every run was written: the raw
file holds them all and the stop line says so. A numpy scalar there is kept exactly (its ``item()``), as
collector values are: a ``numpy.int64`` used to become a float.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _sessions import session_backend

import nsightx
from nsightx.ext import RegionId, RunOutput, Session, new_record, read_raw

METRIC = "env__value"

ENVIRONMENT: dict[str, Any] = {}
"""What the session's ``environment()`` returns: ``ENVIRONMENT["value"]`` (set by each test)."""


class EnvSession(Session):
    """Not deferred; one record a region; its environment is :data:`ENVIRONMENT`'s value."""

    def __init__(self) -> None:
        self.closed: list[RegionId] = []

    def region_enter(self, region: RegionId) -> None:
        pass

    def region_exit(self, region: RegionId, failed: bool) -> None:
        self.closed.append(region)

    def finish_run(self, config: int, run: int) -> RunOutput:
        closed, self.closed = self.closed, []
        return RunOutput([new_record(g.annotation, config, run, "k", METRIC, 1.0, "ns", 0) for g in closed])

    def environment(self) -> Any:
        return ENVIRONMENT["value"]


EnvBackend = session_backend("env_contract", METRIC, EnvSession)


class Plugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(EnvBackend)


@pytest.fixture
def backend(plugin_host: Any) -> Iterator[None]:
    nsightx.register_plugin(Plugin(), name="env_contract")
    try:
        yield
    finally:
        nsightx.unregister_plugin("env_contract")
        ENVIRONMENT.clear()


def _call(folder: Path | None, verbosity: nsightx.VerbosityLevel = nsightx.VerbosityLevel.SILENT) -> Any:
    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=3,
        warmup=1,
        backend="env_contract",
        output_prefix=f"{folder}/" if folder is not None else None,
        verbosity=verbosity,
    )
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    return f()


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({"GPU": "x", "clocks": [1, 2]}, "'clocks' = [1, 2] (list)"),
        ({"limits": {"a": 1}}, "'limits' = {'a': 1} (dict)"),
        ({"when": datetime.datetime(2026, 1, 2)}, "'when' = datetime.datetime(2026, 1, 2, 0, 0) (datetime)"),
        ({"pair": (1, 2)}, "'pair' = (1, 2) (tuple)"),
        ({"vector": np.arange(3)}, "(ndarray)"),
        ({3: "three"}, "has the key 3 (int); keys must be str"),
        (None, "environment() returned NoneType None, not a mapping"),
    ],
)
def test_an_environment_that_is_not_scalars_is_a_plugin_error_and_the_runs_are_kept(
    backend: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], environment: Any, named: str
) -> None:
    ENVIRONMENT["value"] = environment
    with pytest.raises(nsightx.PluginError) as caught:
        _call(tmp_path, nsightx.VerbosityLevel.INFO)
    message = str(caught.value)
    assert message.startswith("backend 'env_contract': environment() ") and named in message
    (raw,) = tmp_path.glob("raw_data-*.jsonl")
    assert [(r.config, r.run) for r in read_raw(raw) if r.config >= 0] == [(c, r) for c in (0, 1) for r in range(3)]
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (
        f"nsightx: f stopped by PluginError after 6 completed run(s), saved in {raw}; load them with "
        f"nsightx.load({str(raw)!r})"
    )


def test_numpy_scalars_in_the_environment_are_kept_exactly(backend: None) -> None:
    big = 2**53 + 1  # float() made it 2**53
    ENVIRONMENT["value"] = {"count": np.int64(big), "ratio": np.float32(0.1), "ok": np.bool_(True)}
    ENVIRONMENT["value"]["name"] = np.str_("a")  # a str subclass: kept as its plain str
    env = _call(None).environment
    got = {key: (env[key], type(env[key])) for key in ("count", "ratio", "ok", "name")}
    assert got == {
        "count": (big, int),
        "ratio": (float(np.float32(0.1)), float),
        "ok": (True, bool),
        "name": ("a", str),
    }
