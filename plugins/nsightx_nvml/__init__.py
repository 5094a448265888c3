"""nsightx_nvml: first-party nsightx plugin (under construction)."""
