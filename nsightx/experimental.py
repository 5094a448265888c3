"""``nsightx.experimental``: APIs whose shape may still change (kept for nsight-python compatibility)."""

from __future__ import annotations

from nsightx._enums import CollectionScope
from nsightx._run.collectors import collect

__all__ = ["CollectionScope", "collect"]
