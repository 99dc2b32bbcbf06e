"""Compiler driver and on-disk cache: C++ source -> loaded shared library, compiled at most once."""
