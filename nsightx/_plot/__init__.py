"""Renderers: plot a result's DataFrame (options, layout, drawing).

They read a DataFrame only, so the results stage can offer ``ProfileResults.plot`` without a circle;
matplotlib is imported only when drawing.
"""
