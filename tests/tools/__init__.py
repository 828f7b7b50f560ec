"""Tests of the side tools (xferbench/tools/: bench, cost, stack, export) and of the clients `xferbench bench` runs
(build/bin/xferload, build/bin/grpcxfer) against the real servers."""
