"""The plugin host: hook specifications, entry-point loading, registrars and the plugin listing.

A plugin that fails to load is recorded, never fatal. Imports the run stage's contracts (backends,
collectors) and below; the run stage never imports it (what a run needs from a plugin, such as a
temperature source, is resolved by the spec stage and handed in).
"""
