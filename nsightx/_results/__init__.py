"""The results stage: from measured runs to values, files and the DataFrame.

Records, the result and raw-file schemas, transforms (combine, derive, normalise), statistics, the
DataFrame, output files, the raw sink and its reader, save/load and ``ProfileResults``. Imports only the
plot renderers and the floor modules.
"""
