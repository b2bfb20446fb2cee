"""Benchmarks (not tests): `python -m bench --help`. Latest figures: bench/README.md."""
