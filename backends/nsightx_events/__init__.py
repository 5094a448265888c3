"""nsightx_events: first-party nsightx plugin (under construction)."""
