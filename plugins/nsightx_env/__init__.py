"""nsightx_env: first-party nsightx plugin (under construction)."""
