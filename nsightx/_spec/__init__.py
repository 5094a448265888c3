"""The spec stage: what the user asked for, validated once, and the plan built from it.

The decorator's options as one pydantic model, the configs, the backend choice ("auto") and the plan
builder. Imports the plugin host (to choose a backend), the run stage (the plan it builds) and below.
"""
