"""Readers of results: ``nsightx.compare``, its statistics and its rendering.

Imports the results stage and below.
"""
