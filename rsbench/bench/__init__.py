"""Benchmarks: scripts that print throughput ratios against a named baseline, run in one process."""
