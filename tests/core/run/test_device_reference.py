"""Which physical GPU each CUDA ordinal is, against a naive reference of CUDA's numbering, on random machines.

The reference follows docs/api.md (``device``: a CUDA ordinal or UUID), docs/plugins.md (nvml, "Which GPU") and
CUDA's own rules: CUDA numbers the GPUs in ``CUDA_DEVICE_ORDER`` (``PCI_BUS_ID``: nvidia-smi's order; otherwise
fastest first, ties in PCI order, which is what CUDA does though its documentation leaves the order after the
fastest open), then keeps those ``CUDA_VISIBLE_DEVICES`` names (indices into that order, UUIDs or unique UUID
prefixes), in its order, up to the first entry that names no single GPU. nvidia-smi/NVML and the CUDA driver are
library boundaries and answer from the random machine; ``nsightx._run.device`` and the nvml plugin's
``DeviceMap`` are the real code.

Where nothing but the CUDA driver can say which GPU an ordinal is (mixed GPUs numbered fastest first, an index
deciding) and the driver cannot answer, the code must refuse (``ConfigError``; the nvml plugin: device not found,
so empty columns), never guess: a wrong GPU's name or clocks next to a number is a silent wrong answer.
"""

from __future__ import annotations

import random

import pytest
from nsightx_nvml._device import DeviceMap, DeviceNotFound
from nsightx_nvml._lib import Nvml
from nvml_double import FakeCuda, FakeGpu, FakeNvml

from nsightx import ConfigError
from nsightx._run.device import resolve, visible

MODELS = (("NVIDIA H200", 4), ("NVIDIA H100 80GB HBM3", 3), ("NVIDIA A100-SXM4-80GB", 2), ("NVIDIA L4", 1))
"""(name, speed): a faster GPU comes first under FASTEST_FIRST."""

EXAMPLES = 150
"""Random machines per test run (the hunt ran 3000)."""

Gpu = tuple[int, str, str]  # (PCI index, uuid, name), as nsightx._run.device takes nvidia-smi's answer


def machine(rng: random.Random) -> tuple[list[Gpu], str | None, str | None]:
    """A random machine (GPUs in PCI order), CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES."""
    n = rng.randint(1, 8)
    same = rng.random() < 0.4
    model = rng.choice(MODELS)[0]
    gpus = []
    for i in range(n):
        h = f"{rng.getrandbits(128):032x}"
        if rng.random() < 0.3 and gpus:  # UUIDs sharing a first digit: prefixes can be ambiguous
            h = gpus[0][1][4] + h[1:]
        name = model if same else rng.choice(MODELS)[0]
        gpus.append((i, f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", name))
    order = rng.choice([None, "PCI_BUS_ID", "FASTEST_FIRST"])
    return gpus, order, mask(rng, gpus)


def mask(rng: random.Random, gpus: list[Gpu]) -> str | None:
    """A random CUDA_VISIBLE_DEVICES: unset, empty, indices, UUIDs or prefixes, reordered, with gaps or bad ones."""
    kind = rng.choice(["unset", "empty", "index", "uuid", "prefix", "mixed"])
    if kind in ("unset", "empty"):
        return None if kind == "unset" else ""
    picked = rng.sample(gpus, rng.randint(1, len(gpus)))
    items = []
    for g in picked:
        how = kind if kind != "mixed" else rng.choice(["index", "uuid", "prefix"])
        if how == "index":
            items.append(str(rng.randrange(len(gpus))))  # an index in CUDA's order, whichever GPU it is
        elif how == "uuid":
            items.append(g[1] if rng.random() < 0.5 else g[1][4:])
        else:
            cut = g[1][: 4 + rng.randint(1, 10)]
            items.append(cut if rng.random() < 0.5 else cut[4:])
    if rng.random() < 0.3:  # a gap: an index past the last GPU, an empty entry, or a UUID of no GPU
        items.insert(rng.randrange(len(items) + 1), rng.choice([str(len(gpus) + 1), "", "GPU-zzzz"]))
    return ",".join(items)


def cuda_order(gpus: list[Gpu], order: str | None) -> list[Gpu]:
    """Every GPU in CUDA's numbering before CUDA_VISIBLE_DEVICES."""
    if order == "PCI_BUS_ID":
        return list(gpus)
    speed = dict(MODELS)
    return sorted(gpus, key=lambda g: (-speed[g[2]], g[0]))


def reference(gpus: list[Gpu], order: str | None, value: str | None) -> list[Gpu]:
    """The GPUs CUDA numbers 0, 1, ... in this process."""
    base = cuda_order(gpus, order)
    if value is None:
        return base
    seen = []
    for item in value.split(","):
        item = item.strip()
        if item.isdigit():
            match = [base[int(item)]] if int(item) < len(base) else []
        else:
            key = item if item.startswith("GPU-") else f"GPU-{item}"
            match = [g for g in gpus if item and g[1].startswith(key)]
        if len(match) != 1:
            break
        seen.append(match[0])
    return seen


def undecidable(gpus: list[Gpu], order: str | None, value: str | None) -> bool:
    """Only the CUDA driver can tell: mixed GPUs numbered fastest first, and an index decides."""
    indices = value is None or any(v.strip().isdigit() for v in value.split(","))
    return order != "PCI_BUS_ID" and len({g[2] for g in gpus}) > 1 and indices


def examples(seed: int, count: int = EXAMPLES):
    rng = random.Random(seed)
    for _ in range(count):
        gpus, order, value = machine(rng)
        want = reference(gpus, order, value)
        if len({g[1] for g in want}) == len(want):  # a GPU named twice: docs silent on what CUDA does
            yield gpus, order, value, want


def test_visible_and_resolve_name_the_gpu_cuda_numbers(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # a mask of None: unset
    checked = 0
    for gpus, order, value, want in examples(1):
        for up in (True, False):
            driver = (lambda w=want: [g[1] for g in w]) if up else (lambda: None)
            case = f"gpus={gpus} order={order} mask={value!r} driver up={up}"
            if not up and undecidable(gpus, order, value):
                with pytest.raises(ConfigError, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
                    visible(value, gpus=gpus, order=order or "", driver=driver)
                continue
            got = visible(value, gpus=gpus, order=order or "", driver=driver)
            assert [(g.ordinal, g.index, g.uuid, g.name) for g in got] == [(k, *g) for k, g in enumerate(want)], case
            for k, g in enumerate(want):
                assert resolve(k, got).label == f"{k}:{g[1]}", case
                assert resolve(g[1], got).ordinal == k, case
            with pytest.raises(ConfigError, match="does not exist"):
                resolve(len(want), got)
            checked += 1
    assert checked > EXAMPLES


def test_nvml_reads_the_gpu_cuda_numbers():
    checked = 0
    for gpus, order, value, want in examples(2):
        fakes = [FakeGpu(uuid, name=name) for _, uuid, name in gpus]
        environ = {k: v for k, v in (("CUDA_DEVICE_ORDER", order), ("CUDA_VISIBLE_DEVICES", value)) if v is not None}
        up = FakeCuda({k: g[1][4:] for k, g in enumerate(want)})
        for cuda in (up, FakeCuda(None)):
            devices = DeviceMap(Nvml(FakeNvml(fakes)), cuda, environ)
            case = f"gpus={gpus} env={environ} cuda up={cuda is up}"
            for k, g in enumerate(want):
                if cuda is not up and undecidable(gpus, order, value):
                    with pytest.raises(DeviceNotFound, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
                        devices.resolve(k)
                    continue
                assert devices.resolve(k).handle.uuid == g[1], case
                checked += 1
    assert checked > EXAMPLES


def test_mixed_gpus_fastest_first_an_index_is_not_nvidia_smis_index(monkeypatch):
    # the minimal case the hunt found: an L4 at PCI index 0, an H200 at index 1, CUDA_DEVICE_ORDER unset: CUDA
    # device 0 is the H200; nvidia-smi's order named (and device="GPU-<L4>" selected) the wrong GPU
    from nsightx._run import device

    gpus = [(0, "GPU-11111111-0000-0000-0000-000000000000", "NVIDIA L4"), (1, "GPU-22222222-0000", "NVIDIA H200")]
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setattr(device, "cuda_uuids", lambda: [gpus[1][1], gpus[0][1]], raising=False)  # the driver
    got = visible("0,1", gpus=gpus)
    assert [(g.label, g.name) for g in got] == [(f"0:{gpus[1][1]}", "NVIDIA H200"), (f"1:{gpus[0][1]}", "NVIDIA L4")]
    assert resolve("GPU-1111", got).ordinal == 1
    monkeypatch.setattr(device, "cuda_uuids", lambda: None, raising=False)  # no driver to ask
    with pytest.raises(ConfigError, match=r"FASTEST_FIRST \(the default\).*0: NVIDIA L4, 1: NVIDIA H200"):
        visible("0", gpus=gpus)
    assert [g.uuid for g in visible("GPU-1111", gpus=gpus)] == [gpus[0][1]]  # a UUID decides: no driver needed
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert [g.uuid for g in visible("0", gpus=gpus)] == [gpus[0][1]]


def test_nvml_before_cuda_is_up_does_not_guess_on_mixed_gpus():
    fakes = [FakeGpu("GPU-11111111-0000", name="NVIDIA L4"), FakeGpu("GPU-22222222-0000", name="NVIDIA H200")]
    before = DeviceMap(Nvml(FakeNvml(fakes)), FakeCuda(None), {"CUDA_VISIBLE_DEVICES": "0"})
    with pytest.raises(DeviceNotFound, match=r"FASTEST_FIRST \(the default\).*NVIDIA L4, NVIDIA H200"):
        before.resolve(0)
    pci = DeviceMap(Nvml(FakeNvml(fakes)), FakeCuda(None), {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert pci.resolve(0).handle.uuid == "GPU-11111111-0000"
