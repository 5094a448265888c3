"""The one frozen pydantic base that every nsightx model derives from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict model: unknown fields are errors.

    Field docstrings are not made descriptions here (``use_attribute_docstrings``): pydantic reads each class's
    source to find them, ~45 ms of the ~215 ms that a script's first ``@nsightx.analyze.kernel`` spent importing
    (issue 35), and nothing reads them but the message of an unknown backend option, whose base
    (:class:`~nsightx._run.backend.BackendOptions`) turns them on for itself.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
