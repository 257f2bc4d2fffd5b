"""Benchmark scripts: each compares a model of the package with a hand-written reference in the same run.

Run them from the repository root as modules, e.g. ``python -m benchmarks.bench_generate``.
"""
