"""The run stage: everything that happens while the user's function runs.

The backend contract, the plan, the shared run loop with its collection policy, the run context and
``annotate``, collectors, the thermal guard, adaptive runs, device choice and progress. Imports only the
results stage (records, the sink) and the floor modules (errors, enums, models, CUDA facts).
"""
