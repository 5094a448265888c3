"""``python -m nsightx``: the ``nsightx`` command (:mod:`nsightx.cli`), for when the console script is not on PATH.

Python runs this module only under ``-m``; ``import nsightx`` never imports it, so it costs the package nothing.
"""

from __future__ import annotations

from nsightx.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
