"""The facts a profiled call adds to its environment that its measurements do not change, asked ahead.

Host name, Python and nsightx versions, CPU model, git commit, torch (see :mod:`nsightx._run.provenance`) are the
same whenever a call asks for them once its user's function ran for the last time. A deferred session's call (a
GPU backend's) asks while the GPU still works through its last runs (the run loop's ``while_waiting``), not after
the last wait, where they were ~15% of the work left on an H100 (issue 35). A call whose session never waits so
asks afterwards, as before.
"""

from __future__ import annotations

import platform
import socket

from nsightx._results.records import Scalar
from nsightx._run.provenance import host_facts
from nsightx._version import __version__


class CallFacts:
    """A call's process and provenance facts, asked once: ahead by :meth:`prepare`, or when :meth:`facts` is.

    :meth:`prepare` never raises: what asking raised is kept and raised by :meth:`facts`, where the call asked
    before (after its run stage), so that the user sees the same error at the same step of the call.

    Example:
        >>> facts = CallFacts()
        >>> facts.prepare()
        >>> process, provenance = facts.facts()
        >>> sorted(process), "CPU" in provenance
        (['Host', 'nsightx', 'python'], True)
    """

    def __init__(self) -> None:
        self._known: tuple[dict[str, Scalar], dict[str, Scalar]] | None = None
        self._error: Exception | None = None

    def prepare(self) -> None:
        """Ask for the facts now (the run loop calls it while the GPU works); an error is kept for :meth:`facts`."""
        if self._known is not None or self._error is not None:
            return
        try:
            self._known = _ask()
        except Exception as e:  # raised by facts(), where the call asked before
            self._error = e

    def facts(self) -> tuple[dict[str, Scalar], dict[str, Scalar]]:
        """(``Host``/``python``/``nsightx``, :func:`~nsightx._run.provenance.host_facts`), asked now if not yet.

        Raises:
            Exception: what asking raised, in :meth:`prepare` or now.
        """
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._known is None:
            self._known = _ask()
        return self._known


def _ask() -> tuple[dict[str, Scalar], dict[str, Scalar]]:
    """The facts, in the order a call adds them to its environment."""
    process: dict[str, Scalar] = {
        "Host": socket.gethostname(),
        "python": platform.python_version(),
        "nsightx": __version__,
    }
    return process, host_facts()
