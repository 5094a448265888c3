"""The one frozen pydantic base that every nsightx model derives from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict model: unknown fields are errors, field docstrings become descriptions."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
