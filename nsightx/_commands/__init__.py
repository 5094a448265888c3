"""The command line's larger subcommands: ``doctor`` and ``demo``.

Only ``nsightx.cli`` imports them.
"""
