"""What one measured window reads: /metrics scrapes (scrape.py) behind a metrics source (sources.py, targets.py),
the window's figures (figures.py), /proc and cgroup figures (procfs.py, cgroup.py), CPU attribution (profile/),
the soak's watch (soak.py, growth.py), step windows (steps.py) and the capacity search (capacity.py)."""
