"""One experiment run: the sweep over its cells, each run's lifecycle (start, measure, collect, stop), the
load phase's sampling loop and what it writes. Servers are reached through one handle (handle.py), whatever
runs them: a host process or a container."""
