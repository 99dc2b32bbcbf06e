"""Whether an operation's operand and its ``out=`` touch a shared byte at different thread indices.

Thread ``i`` of an element-wise kernel reads element ``i`` of each operand and then writes element ``i`` of its
target, so an operand sharing memory with the target is safe when every shared byte is at the same index in both:
a row copied into a column of one matrix meet at one element, at index 0 of both (covariance's
``cov[i:, i] = cov[i, i:]``), while shifted slices of one array meet at other indices, and NumPy's semantics (all
inputs read first) then need a copy (kfuse/ops/lazy.py).
A View of a flat kernel visits ``n`` addresses in arithmetic progression (``start + k * step`` bytes: a
contiguous View of any rank, or a 1-D one); for two such progressions the shared addresses are the solutions of
``i * step_a - j * step_b = start_b - start_a``, counted without enumerating them. Other Views (strided 2-D) are
taken to conflict wherever their spans overlap.
"""
from __future__ import annotations


def progression(view) -> tuple | None:
    """(start, step, itemsize) of the addresses a flat kernel visits in ``view``, or None."""
    itemsize = view.dtype.np.itemsize
    if view.storage == "right":
        return view.ptr, itemsize, itemsize
    if view.ndim == 1:
        return view.ptr, view.strides[0] * itemsize, itemsize
    return None


def conflict(a, b) -> bool:
    """Whether Views ``a`` and ``b`` of one kernel (of one shape, or contiguous or 1-D of one size) share a byte
    at different indices: ``a``'s bytes at index ``i`` and ``b``'s at index ``j != i``."""
    if not (a.bounds[0] < b.bounds[1] and b.bounds[0] < a.bounds[1]):
        return False
    pa, pb = progression(a), progression(b)
    if pa is None or pb is None or pa[2] != pb[2] or (pb[0] - pa[0]) % pa[2]:
        return True  # not progressions, or a partial element overlap: taken to conflict
    return meets_apart(pa[0], pa[1], pb[0], pb[1], a.size)


def meets_apart(start_a: int, step_a: int, start_b: int, step_b: int, n: int) -> bool:
    """Whether ``start_a + i * step_a == start_b + j * step_b`` for some ``0 <= i, j < n`` with ``i != j``."""
    d = start_b - start_a
    if step_a == 0 or step_b == 0:
        if step_a == step_b:
            return d == 0 and n > 1
        step, d = (step_b, -d) if step_a == 0 else (step_a, d)  # one address against a progression
        return d % step == 0 and 0 <= d // step < n and n > 1
    if step_a == step_b:  # i - j is the same for every solution
        return d % step_a == 0 and 0 < abs(d // step_a) < n
    g, x, y = _euclid(step_a, -step_b)  # step_a * x - step_b * y == g
    if d % g:
        return False
    i0, j0 = x * (d // g), y * (d // g)  # one solution; all: i0 + k * u, j0 + k * w
    u, w = -step_b // g, -step_a // g
    lo, hi = _range(i0, u, n)
    lo_j, hi_j = _range(j0, w, n)
    lo, hi = max(lo, lo_j), min(hi, hi_j)
    if lo > hi:
        return False
    if hi > lo:
        return True  # two solutions: only one can have i == j (the steps differ)
    return i0 + lo * u != j0 + lo * w


def _range(start: int, step: int, n: int) -> tuple:
    """The k with ``0 <= start + k * step < n`` (``step`` not 0), as (first, last)."""
    if step > 0:
        return -(start // step), (n - 1 - start) // step
    return -((n - 1 - start) // -step), start // -step


def _euclid(a: int, b: int) -> tuple:
    """(g, x, y) with ``a * x + b * y == g == gcd(a, b) > 0``."""
    x0, y0, x1, y1 = 1, 0, 0, 1
    while b:
        q = a // b
        a, b = b, a - q * b
        x0, x1 = x1, x0 - q * x1
        y0, y1 = y1, y0 - q * y1
    return (a, x0, y0) if a > 0 else (-a, -x0, -y0)
