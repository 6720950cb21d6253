"""Benchmarks and experiments: each module is one bench, run from the repository root as
`.venv/bin/python -m bench.NAME`; see docs/benchmarks.md."""
