"""The side tools of the command line: `xferbench cost` (cost.py), `export` (export.py), `stack` (stack.py and its
Prometheus launcher, prometheus.py) and `bench` (bench/): each uses the run and its analysis, none is used by them."""
