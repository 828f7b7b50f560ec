"""Tests of the benchmark tools (build/bin/xferload) against the real servers."""
