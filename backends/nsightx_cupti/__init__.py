"""nsightx_cupti: first-party nsightx plugin (under construction)."""
