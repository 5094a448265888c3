"""nsightx_ncu: first-party nsightx plugin (under construction)."""
