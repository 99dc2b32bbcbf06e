"""The workunits random programs call, and what the oracle needs to know about each.

They cover every kind of call the fuser and the tracer treat differently: element-wise kernels it can
fuse, a neighbour stencil it must not fuse with its producer, 2-D rows, reductions and a scan whose
results feed later calls, TeamPolicy kernels (one staging rows through team scratch memory), a helper taking Views, a ``@pk.classtype`` value built, changed
by a helper and a method, and read (element-wise, so it fuses), a ``@pk.functor`` method kernel, a subview, float32/bool/int32/int64 Views, two
kernels that divide by zero when told to (one compiled and fusable, one run in Python by the Debug
space), and one whose C++ "fails to compile" under :func:`kfuse.check.faults.failing_compiles`.
Module level, so each specialisation compiles once per cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import kfuse as pk

from .arrays import K

#: A constant only :func:`k_broken` contains: its C++ (alone or fused) is refused by the injected compiler.
BROKEN_MARK = "0.3173828125"


@pk.workunit
def k_scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * x[i] + 1.0


@pk.workunit
def k_axpy(i: int, alpha: float, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * (y[i] + x[i] / (1.0 + pk.fabs(alpha)))


@pk.workunit
def k_stencil(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    n: int = x.extent(0)
    left: float = x[i]
    right: float = x[i]
    if i > 0:
        left = x[i - 1]
    if i + 1 < n:
        right = x[i + 1]
    y[i] = (left + x[i] + right) / 3.0


@pk.workunit
def k_sin(i: int, x: pk.View1D[pk.double]):
    x[i] = pk.sin(x[i]) + 0.25


@pk.workunit
def k_dot(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i] * y[i]


@pk.workunit
def k_halve_dot(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    """Loads, stores, then reads what it stored (y may be x): a block reduction takes x[i] and y[i] first, and
    must read them again after the store (kfuse/codegen/blocks.py)."""
    t: float = x[i] + y[i]
    x[i] = t * 0.5
    acc += x[i] * y[i] + t


@pk.workunit
def k_rowsum(i: int, m: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    s: float = 0.0
    for j in range(m.extent(1)):
        s += m[i][j]
    out[i] = s / m.extent(1)


@pk.workunit
def k_rank1(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], m: pk.View2D[pk.double]):
    for j in range(m.extent(1)):
        m[i][j] = 0.5 * m[i][j] + x[i] * y[j]


@pk.workunit
def k_scan(i: int, acc: pk.Acc[pk.double], last_pass: bool, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i]
    if last_pass:
        y[i] = acc / (i + 1)


@pk.function
def peek(v: pk.View1D[pk.double], k: int) -> float:
    return v[k]


@pk.workunit
def k_helper(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.25 * peek(x, i) + 0.5 * peek(y, i)


@pk.classtype
class Pair:
    def __init__(self, a: float):
        self.a: float = a
        self.b: float = 1.0 - a

    def spread(self) -> float:
        self.b *= 0.5
        return self.a - self.b


@pk.function
def pair_shift(p: Pair, by: float):
    p.a += by


@pk.workunit
def k_pair(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    p: Pair = Pair(x[i])
    pair_shift(p, 0.25)
    d: float = p.spread()
    y[i] = d + p.b


@pk.functor
class Blend:
    """A functor (PyKokkos's class style): its kernel reads fields and calls a @pk.function method."""

    def __init__(self, alpha: float, x, y):
        self.alpha: float = alpha
        self.x: pk.View1D[pk.double] = x
        self.y: pk.View1D[pk.double] = y

    @pk.workunit
    def blend(self, i: int):
        self.y[i] = 0.5 * (self.y[i] + self.x[i] * self.weight())

    @pk.function
    def weight(self) -> float:
        return 1.0 / (1.0 + pk.fabs(self.alpha))


@pk.workunit
def k_subrow(i: int, m: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    row = m[i, :]
    out[i] = 0.5 * out[i] + row[0] - row[row.extent(0) - 1]


@pk.workunit
def k_to_f32(i: int, x: pk.View1D[pk.double], f: pk.View1D[pk.float32]):
    f[i] = 0.5 * f[i] + x[i] / 3.0


@pk.workunit
def k_from_f32(i: int, f: pk.View1D[pk.float32], y: pk.View1D[pk.double]):
    y[i] = 0.25 * y[i] + f[i]


@pk.workunit
def k_flag(i: int, x: pk.View1D[pk.double], flag: pk.View1D[pk.bool_]):
    flag[i] = (x[i] > 0.25) != flag[i]


@pk.workunit
def k_count(i: int, flag: pk.View1D[pk.bool_], n: pk.View1D[pk.int32]):
    if flag[i]:
        n[i] = n[i] + 3
    else:
        n[i] = n[i] - 1


@pk.workunit
def k_widen(i: int, n: pk.View1D[pk.int32], w: pk.View1D[pk.int64]):
    w[i] = w[i] + 2 * n[i] - i


@pk.workunit
def k_isum(i: int, acc: pk.Acc[pk.int64], w: pk.View1D[pk.int64]):
    acc += w[i]


@pk.workunit
def k_fsum(i: int, acc: pk.Acc[pk.double], f: pk.View1D[pk.float32]):
    acc += f[i]


@pk.workunit
def k_team_rowsum(team: pk.TeamMember, m: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    r: int = team.league_rank()

    def part(j: int, acc: pk.Acc[pk.double]):
        acc += m[r][j] * (j + 1)

    s: float = pk.parallel_reduce(pk.TeamThreadRange(team, m.extent(1)), part)
    if team.team_rank() == 0:
        out[r] = s


@pk.workunit
def k_team_scale(team: pk.TeamMember, alpha: float, x: pk.View1D[pk.double], m: pk.View2D[pk.double]):
    r: int = team.league_rank()

    def row(j: int):
        m[r][j] = 0.5 * m[r][j] + x[r] / (1.0 + pk.fabs(alpha))

    pk.parallel_for(pk.TeamThreadRange(team, m.extent(1)), row)


@pk.workunit
def k_team_stage(team: pk.TeamMember, m: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    """A row of ``m`` staged through team scratch memory of constant extent (``K``: the host can size it, so a GPU
    replay queues the launch; the fuzzer's too, __main__.py), then summed back to front by one thread."""
    r: int = team.league_rank()
    row: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), K)

    def load(j: int):
        row[j] = m[r][j] * (j + 2)

    pk.parallel_for(pk.TeamThreadRange(team, m.extent(1)), load)
    team.team_barrier()
    if team.team_rank() == 0:
        s: float = 0.0
        for j in range(m.extent(1)):
            s += row[m.extent(1) - 1 - j]
        out[r] = s


@pk.workunit
def k_team_total(team: pk.TeamMember, acc: pk.Acc[pk.double], m: pk.View2D[pk.double]):
    r: int = team.league_rank()
    if team.team_rank() == 0:
        acc += m[r][0] - m[r][m.extent(1) - 1]


@pk.workunit
def k_debug(i: int, flag: int, x: pk.View1D[pk.double]):
    q: int = 7 // (i - flag)  # raises ZeroDivisionError (in the Debug space) at i == flag
    x[i] = 0.5 * x[i] + 0.125 * q


@pk.workunit
def k_divide(i: int, flag: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * x[i] + 0.125 * (7 // (i - flag))  # a kernel fault (ZeroDivisionError) at i == flag


@pk.workunit
def k_divide_by(i: int, flag: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * x[i] + 0.125 * (i // flag) + 0.0625 * (i % flag)  # a kernel fault (ZeroDivisionError) at flag 0


def ops_chain(x, y, alpha):
    """Array operations, not a workunit: ``y = exp(x / 4) * alpha + y / 2`` over the common length, whose two
    intermediate arrays the program drops at once (fused, nothing stores them: kfuse/tracer/liveness.py)."""
    n = min(x.shape[0], y.shape[0])
    ys = y[:n]
    pk.add(pk.multiply(pk.exp(pk.multiply(x[:n], 0.25)), alpha), pk.multiply(ys, 0.5), out=ys)


def ops_sum(x, y, alpha):
    """Array operations ending in a whole-array sum (a Future while fusing): ``sum((x - y) * alpha)``, with
    ``alpha`` possibly an earlier result (a Future scalar operand)."""
    n = min(x.shape[0], y.shape[0])
    return pk.sum(pk.multiply(pk.subtract(x[:n], y[:n]), alpha))


def ops_shift(x, y, alpha):
    """Array operations over shifted Views of one array (a stencil): ``y[:-1] = x[1:] * alpha + x[:-1]`` then
    ``y[:-1] = sqrt(|y[1:]|) / 2 + y[:-1]`` reads the first statement's store one element over."""
    n = min(x.shape[0], y.shape[0])
    if n < 3:
        return
    pk.add(pk.multiply(x[1:n], alpha), x[:n - 1], out=y[:n - 1])
    t = pk.multiply(pk.sqrt(pk.absolute(y[1:n - 1])), 0.5)
    pk.add(t, y[:n - 2], out=y[:n - 2])


def ops_rows(m, out, alpha):
    """Array operations on the matrix ending in row sums: ``out[:n] = sum((m * alpha - m[0]) ** 2, axis=1) / 2 + 1``,
    its first row broadcast and its 2-D intermediates dropped (fused, the row sums and the steps after them are
    computed in the chain's kernel: kfuse/ops/lazy.py ``rows_sum``)."""
    n = min(m.shape[0], out.shape[0])
    sums = pk.sum(pk.square(pk.subtract(pk.multiply(m, alpha), m[0:1, :])), axis=1)
    pk.add(pk.multiply(sums, 0.5)[:n], 1.0, out=out[:n])


@pk.workunit
def k_broken(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] * 0.3173828125  # BROKEN_MARK


@dataclass(frozen=True)
class Kernel:
    """A workunit as the generator and the oracle see it.

    ``kinds``: per View parameter, the arrays it may take (``f64``: any 1-D float64 array; otherwise one
    fixed array name). ``writes``: the View parameters it writes (every View parameter counts as read).
    ``scalar``: the scalar parameter fed a call's ``alpha`` (a number or an earlier result), if any.
    ``policy``: ``range``, ``team`` (one team per row), ``debug`` (a RangePolicy in the Debug space) or ``ops``
    (``workunit`` is a function of the arguments calling kfuse's array operations).
    ``opaque``: View parameters handed to a ``@pk.function``, which kfuse's access summary counts as written
    (so a failure it depends on poisons them too).
    """

    workunit: object
    op: str
    params: tuple
    kinds: tuple
    writes: tuple
    scalar: str | None = None
    policy: str = "range"
    opaque: tuple = ()
    method: str | None = None  # ``workunit`` is a functor class: the call is ``Class(**args).method``
    scratch: int = 0  # a team kernel's level-0 scratch bytes per team


F64 = "f64"
KERNELS = {
    "scale": Kernel(k_scale, "for", ("x", "y"), (F64, F64), ("y",)),
    "axpy": Kernel(k_axpy, "for", ("x", "y"), (F64, F64), ("y",), "alpha"),
    "stencil": Kernel(k_stencil, "for", ("x", "y"), (F64, F64), ("y",)),
    "sin": Kernel(k_sin, "for", ("x",), (F64,), ("x",)),
    "rowsum": Kernel(k_rowsum, "for", ("m", "out"), ("M", F64), ("out",)),
    "rank1": Kernel(k_rank1, "for", ("x", "y", "m"), (F64, F64, "M"), ("m",)),
    "dot": Kernel(k_dot, "reduce", ("x", "y"), (F64, F64), ()),
    "halve_dot": Kernel(k_halve_dot, "reduce", ("x", "y"), (F64, F64), ("x",)),
    "scan": Kernel(k_scan, "scan", ("x", "y"), (F64, F64), ("y",)),
    "helper": Kernel(k_helper, "for", ("x", "y"), (F64, F64), ("y",), opaque=("x", "y")),
    "pair": Kernel(k_pair, "for", ("x", "y"), (F64, F64), ("y",)),
    "blend": Kernel(Blend, "for", ("x", "y"), (F64, F64), ("y",), "alpha", method="blend"),
    "ops_chain": Kernel(ops_chain, "for", ("x", "y"), (F64, F64), ("y",), "alpha", policy="ops"),
    "ops_sum": Kernel(ops_sum, "reduce", ("x", "y"), (F64, F64), (), "alpha", policy="ops"),
    "ops_shift": Kernel(ops_shift, "for", ("x", "y"), (F64, F64), ("y",), "alpha", policy="ops"),
    "ops_rows": Kernel(ops_rows, "for", ("m", "out"), ("M", F64), ("out",), "alpha", policy="ops"),
    "subrow": Kernel(k_subrow, "for", ("m", "out"), ("M", F64), ("out",)),
    "to_f32": Kernel(k_to_f32, "for", ("x", "f"), (F64, "f32"), ("f",)),
    "from_f32": Kernel(k_from_f32, "for", ("f", "y"), ("f32", F64), ("y",)),
    "flag": Kernel(k_flag, "for", ("x", "flag"), (F64, "flag"), ("flag",)),
    "count": Kernel(k_count, "for", ("flag", "n"), ("flag", "i32"), ("n",)),
    "widen": Kernel(k_widen, "for", ("n", "w"), ("i32", "i64"), ("w",)),
    "isum": Kernel(k_isum, "reduce", ("w",), ("i64",), ()),
    "fsum": Kernel(k_fsum, "reduce", ("f",), ("f32",), ()),
    "team_rowsum": Kernel(k_team_rowsum, "for", ("m", "out"), ("M", F64), ("out",), policy="team"),
    "team_scale": Kernel(k_team_scale, "for", ("x", "m"), (F64, "M"), ("m",), "alpha", policy="team"),
    "team_stage": Kernel(k_team_stage, "for", ("m", "out"), ("M", F64), ("out",), policy="team",
                         scratch=pk.ScratchView1D[pk.double].shmem_size(K)),
    "team_total": Kernel(k_team_total, "reduce", ("m",), ("M",), (), policy="team"),
    "debug": Kernel(k_debug, "for", ("x",), (F64,), ("x",), "flag", policy="debug"),
    "divide": Kernel(k_divide, "for", ("x", "y"), (F64, F64), ("y",), "flag"),
    # divides by its argument only: a GPU launch checks it on the host and queues (the fuzzer's too: __main__.py)
    "divide_by": Kernel(k_divide_by, "for", ("x", "y"), (F64, F64), ("y",), "flag"),
    "broken": Kernel(k_broken, "for", ("x", "y"), (F64, F64), ("y",)),
}

#: Kernels reading a neighbour of the element they write: their two arrays must not share memory, or
#: even eager runs would race between threads.
NEIGHBOUR_READERS = frozenset({"stencil", "ops_shift"})
