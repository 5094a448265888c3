"""A host-backend sweep that kills itself at a chosen point, for the naive reference of a killed sweep.

As a script: ``python killed_sweep.py <spec.json>``. The spec says the sweep (``configs``: distinct ints,
``runs``, ``warmup``, ``regions``: names, ``failing``: the one region opened with ``ignore_failures=True`` or
``None``, ``run_collector``/``once_collector``: bools, ``derive``: bool, ``backend``: ``"host"`` or
``"deferredhost"`` (the host session made deferred, its runs handed back in batches of ``every``), ``prefix``,
``auto``: the ``runs="auto"`` options or ``{}``, ``config_collector``/``annotation_collector``: bools)
and where to die: ``kill = {"signal": 9, 15 or 2, "where": ..., "at": k}``, counted, never timed:

- ``"start"``, ``"end"``: at the start or the end of the k-th call of the function (warm-up calls counted);
- ``"region"``: inside the first region of the k-th call;
- ``"collector"``: in the RUN collector of the k-th measured run (calls of it counted);
- ``"config"``, ``"annotation"``: in the k-th call of the CONFIG or ANNOTATION collector;
- ``"derive"``: in the k-th call of ``derive_metric`` (the first is the first run's check, the others build the
  result after the last run);
- ``"once"``: in the ONCE collector (before any run).

The side channel (``side``, a file this script only appends to and fsyncs) gets one JSON line per fact, written
before the next thing happens: ``{"once": v}`` (the ONCE collector's answer), ``{"collect": [c, r], "value": v}``
(a RUN collector's answer; ``{"config": c, ...}`` and ``{"annotation": [c, r, name], ...}`` the others'),
``{"done": [c, r], "failed": bool}`` when the function's body has run to its end
(``r`` < 0: a warm-up call), ``{"kill": step}`` just before the signal is sent.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
from typing import Any

from _sessions import DeferredPlugin

import nsightx
from nsightx._run import backend as _backend

SPECIAL = [math.inf, -math.inf, 0.0, -0.0, 1e308, 5e-324, 2**53 + 1, -7]


class Side:
    """The side channel: each fact appended in one write and fsynced before the sweep goes on."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def note(self, **fact: Any) -> None:
        os.write(self.fd, (json.dumps(fact) + "\n").encode())
        os.fsync(self.fd)


def main(spec: dict[str, Any]) -> None:
    """Run the sweep of ``spec``; it dies by ``spec["kill"]`` (or returns when the kill point is never reached)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent started in the background ignores it
    side, kill, rng = Side(spec["side"]), spec["kill"], random.Random(spec["seed"])
    configs, warmup, regions, failing = spec["configs"], spec["warmup"], spec["regions"], spec["failing"]
    calls = {"step": 0, "measured": 0}
    per_config = dict.fromkeys(configs, 0)

    def die(where: str, step: int) -> None:
        if kill["where"] == where and kill["at"] == step:
            side.note(kill=step)
            os.kill(os.getpid(), kill["signal"])

    def value() -> Any:
        return rng.choice(SPECIAL) if rng.random() < 0.3 else rng.random()

    def run_value(ctx: Any) -> Any:
        calls["measured"] += 1
        die("collector", calls["measured"])
        v = value()
        side.note(collect=[ctx.config, ctx.run], value=repr(v))
        return v

    def config_value(ctx: Any) -> Any:
        calls["config"] = calls.get("config", 0) + 1
        die("config", calls["config"])
        v = value()
        side.note(config=ctx.config, value=repr(v))
        return v

    def annotation_value(ctx: Any) -> Any:
        calls["annotation"] = calls.get("annotation", 0) + 1
        die("annotation", calls["annotation"])
        v = value()
        side.note(annotation=[ctx.config, ctx.run, ctx.annotation], value=repr(v))
        return v

    def derive(t: float, n: int) -> float:
        calls["derive"] = calls.get("derive", 0) + 1
        die("derive", calls["derive"])
        return 2 * t + n

    def once_value(ctx: Any) -> Any:
        die("once", 1)
        v = value()
        side.note(once=repr(v))
        return v

    collectors = []
    if spec["run_collector"]:
        collectors.append(nsightx.InfoCollector("rv", run_value, "run"))
    if spec.get("config_collector"):
        collectors.append(nsightx.InfoCollector("cv", config_value, "config"))
    if spec.get("annotation_collector"):
        collectors.append(nsightx.InfoCollector("av", annotation_value, "annotation"))
    if spec["once_collector"]:
        collectors.append(nsightx.InfoCollector("ov", once_value, "once"))
    if spec["backend"] == "deferredhost":
        _backend.COLLECT_EVERY = spec["every"]
        _backend.COLLECT_SECONDS = math.inf  # counts alone decide when runs are written
        nsightx.register_plugin(DeferredPlugin(), name="deferred")

    def victim(n: int) -> None:
        calls["step"] += 1
        step = calls["step"]
        run = per_config[n] - warmup
        per_config[n] += 1
        die("start", step)
        fails = failing is not None and rng.random() < 0.4
        for i, name in enumerate(regions):
            with nsightx.annotate(name, ignore_failures=name == failing):
                if i == 0:
                    die("region", step)
                sum(range(n))
                if name == failing and fails:
                    raise ValueError("a failing region")
        side.note(done=[configs.index(n), run], failed=fails)
        die("end", step)

    profiled = nsightx.analyze.kernel(
        configs=configs,
        runs=spec["runs"],
        **spec.get("auto", {}),
        warmup=warmup,
        backend=spec["backend"],
        output_prefix=spec["prefix"],
        info_collectors=collectors,
        derive_metric=derive if spec["derive"] else None,
    )(victim)
    profiled()
    side.note(finished=True)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
