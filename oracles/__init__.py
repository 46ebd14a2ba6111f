"""Oracles: does this program fail, and how?

Backends (how to compile and run a graph), checks (crash, nan, mismatch, oom, hang),
the isolated worker pool and failure signatures. Knows nothing of reduction.
"""
