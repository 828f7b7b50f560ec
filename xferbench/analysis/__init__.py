"""What a run's figures become: the row of one run (row.py), the metric table every figure is one row of
(metrics.py), the statistics across repeats (stats.py), a finished run's summary against its baseline (summary.py)
and its typed metadata (runmeta.py). Nothing here starts a process or reads a socket."""
