"""Files written under ``output_prefix``: raw JSON lines during the run, CSVs and the result afterwards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_counters: dict[tuple[str, str, str], int] = {}


@dataclass(frozen=True)
class OutputLocation:
    """Where one call's files go: ``<folder>/<stem><kind>-<tag>.<ext>``."""

    folder: Path
    stem: str
    tag: str
    """``<function>-<n>``."""

    def path(self, kind: str, ext: str) -> Path:
        """Path of one output file, e.g. ``path("profiled_data", "csv")``."""
        return self.folder / f"{self.stem}{kind}-{self.tag}.{ext}"


def allocate(prefix: str, function: str) -> OutputLocation:
    """Create the folder and pick the tag ``<function>-<n>`` for the next call of ``function``.

    ``output_prefix="out/"`` (or an existing folder) writes ``out/profiled_data-f-0.csv``; ``"out/exp1_"``
    writes ``out/exp1_profiled_data-f-0.csv``. ``n`` counts calls in this process and skips numbers whose
    files already exist, so another process writing to the same prefix is never overwritten.
    """
    base = Path(prefix)
    if prefix.endswith(("/", "\\")) or base.is_dir():
        folder, stem = base, ""
    else:
        folder, stem = base.parent, base.name
    folder.mkdir(parents=True, exist_ok=True)
    key = (str(folder.resolve()), stem, function)
    n = _counters.get(key, 0)
    while (folder / f"{stem}raw_data-{function}-{n}.jsonl").exists():
        n += 1
    _counters[key] = n + 1
    return OutputLocation(folder, stem, f"{function}-{n}")
