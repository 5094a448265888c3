"""``nsightx.experimental``: APIs whose shape may still change (kept for nsight-python compatibility)."""

from __future__ import annotations

from nsightx._collectors import collect
from nsightx._enums import CollectionScope

__all__ = ["CollectionScope", "collect"]
