"""The PyFuser paper's Figure 2 example: ``add`` then ``mul`` over rows ``tid`` of 2D arrays.

Fused naively, the two i-loops stay apart and A, B are passed twice; argument fusion, loop fusion,
restrict and redundant-access elimination each remove part of that cost (the per-transform ablation).
"""
from __future__ import annotations

import numpy as np

import kfuse as pk

#: size -> (rows = threads, row length N, add+mul pairs per run)
SIZES = {"smoke": (64, 32, 2), "small": (1024, 256, 10), "medium": (4096, 1024, 10), "large": (8192, 2048, 10)}
S = 2.5


@pk.workunit
def add(tid, A, B, S, N):
    for i in range(N):
        A[tid][i] = S + B[tid][i]


@pk.workunit
def mul(tid, A, B, C, N):
    for i in range(N):
        C[tid][i] = A[tid][i] * B[tid][i]


def make(size: str):
    rows, n, pairs = SIZES[size]
    B = np.random.default_rng(2).random((rows, n))
    return pk.zeros((rows, n)), pk.from_numpy(B), pk.zeros((rows, n)), pairs


def run(A, B, C, pairs: int) -> None:
    """``pairs`` times: add, mul, then read C (a flush of one add+mul group when fusion is on)."""
    rows, n = A.shape
    for _ in range(pairs):
        pk.parallel_for("add", rows, add, A=A, B=B, S=S, N=n)
        pk.parallel_for("mul", rows, mul, A=A, B=B, C=C, N=n)
        pk.fence()


def reference(B: np.ndarray) -> np.ndarray:
    return (S + B) * B
