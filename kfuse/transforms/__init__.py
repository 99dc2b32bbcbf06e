"""Transforms applied to fused kernels (argument fusion, loop fusion, restrict, redundant accesses)."""
