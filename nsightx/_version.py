"""Version of nsightx."""

__version__ = "0.1.0"
