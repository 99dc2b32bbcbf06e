"""GPU range reductions in blocks: which kernels launch through the prelude's ``kf_reduce_in_blocks``, and the
functor members it calls.

One wave of blocks strides over the range, each thread keeping the sums in registers and taking ``KF_UNROLL``
elements an iteration; each block adds its threads' sums with warp shuffles into one partial, and one block adds
the partials in block order, so a result is the same from run to run on a card.

A thread's elements are independent (a reduction's thread indices run in no set order), so the prelude first
loads every element's *leading loads* (``kf_load``: the rank-1 Views the body reads at its thread index before it
stores, branches or calls anything with effects) for all of an iteration's elements, then runs the bodies on the
loaded values. Inlined one after another, each body's loads would otherwise wait behind the previous element's
stores and branches (a ``log``'s), which the compiler cannot move them past. The loaded values are those the body
would read: nothing of its own is stored before them, and another thread index storing there would be a race.
Views a body always reads at its index are also asked for one iteration ahead into L2 (``kf_prefetch``). On the
host (the fuzzer's setting) ``kf_reduce_in_order`` takes the range in order in one thread, the same loads first.
"""
from __future__ import annotations

from typing import NamedTuple

from ..frontend.spec import KernelSpec
from ..ir import nodes as ir
from ..ir.access import evaluated, subexpressions
from .cxx_names import ident
from .printer import checked_division, element_code

#: Spaces whose rank-1 range reductions of several sums run in blocks (``in_blocks``): on a CUDA device the prelude's
#: ``kf_reduce_in_blocks``; elsewhere (the fuzzer adds the host spaces, kfuse/check/__main__.py) ``kf_reduce_in_order``,
#: one thread over the range in the same loads-first order, so that the leading loads are checked against eager runs.
BLOCK_SPACES = frozenset({"Cuda"})
#: Spaces whose single sums run in blocks too: a CUDA device's (``in_blocks``); the fuzzer adds the host spaces, whose
#: sums then all add in one order (index order), eager and fused alike, as its bit-for-bit comparison needs.
SINGLE_SUM_SPACES = frozenset({"Cuda"})
#: Views a block reduction of several sums asks for ahead (``views_ahead``: the first ``sure_thread_loads``): a wave
#: of threads each asking for four elements of a View ahead holds about 8.6 MB of an H200's 50 MB L2 per View, so more
#: would evict what was asked for before its use. On H200 hosts one View ahead made BabelStream's ten sums 0.510 ->
#: 0.456 ms (one host); three made the Gaussian chain's sum in blocks 0.534 -> 0.666 ms (two hosts, torch.compile
#: 0.507 and 0.603 on them).
MOST_PREFETCHED = 2
#: The space whose reductions in blocks run on the device (the prelude's CUDA form); others run in order on the host.
_DEVICE = "Cuda"
#: Expressions with effects, or whose values the body's order decides: leading loads end before them.
_EFFECTS = (ir.HelperCall, ir.Atomic, ir.New, ir.Nested, ir.TeamQuery)


class LeadingLoads(NamedTuple):
    """The body's first ``statements`` statements read ``views`` (rank-1, at the thread index) before anything
    could change them; ``kf_load`` loads them, and those statements read the loaded values."""

    index: str
    views: tuple
    statements: int

    def value(self, e) -> str | None:
        """The C++ name of load ``e`` among the loaded values (printed in a leading statement), or None."""
        if _loads_at(e, self.index) and e.view in self.views:
            return f"kf_in.l{self.views.index(e.view)}"
        return None


def in_blocks(spec: KernelSpec) -> bool:
    """Whether the kernel is a rank-1 range reduction of several sums (a fused group's) in a ``BLOCK_SPACES`` space,
    or of one in a ``SINGLE_SUM_SPACES`` one. On H200 hosts (README, "GPU range reductions") BabelStream's ten fused
    sums took 0.53 ms in Kokkos's form (in lanes), 0.31 in blocks (stop 55, benchmarks/bench_gpu_reductions.py); the
    Gaussian chain's single sum 0.48 ms in Kokkos's form and 0.40 in blocks (benchmarks/bench_gpu_sum_forms.py)."""
    return spec.op == "reduce" and spec.policy == "range" and spec.rank == 1 and spec.space in BLOCK_SPACES and \
        (len(spec.accs) > 1 or spec.space in SINGLE_SUM_SPACES)


def views_ahead(spec: KernelSpec, kernel: ir.Kernel, index: str) -> list[str]:
    """The Views ``kf_prefetch`` asks for ahead: for several sums the first ``MOST_PREFETCHED`` sure reads, for one
    sum none. On an H200 host the Gaussian chain's single sum took 0.398-0.410 ms (kernel, C++-timed) with none ahead,
    0.417 with one and 0.425 with two (stop 55, one host)."""
    return sure_thread_loads(kernel, index)[:MOST_PREFETCHED] if len(spec.accs) > 1 else []


def launcher(spec: KernelSpec) -> str:
    """The prelude's function that runs a kernel in blocks: a CUDA device's, or the host's in the same order."""
    return "kf_reduce_in_blocks" if spec.space == _DEVICE else "kf_reduce_in_order"


def _loads_at(e, index: str) -> bool:
    """Whether ``e`` loads a View's element ``index`` (one index: the thread index's name)."""
    return isinstance(e, ir.Load) and len(e.indices) == 1 and isinstance(e.indices[0], ir.Name) \
        and e.indices[0].id == index


def _at_index(e, index: str, views: dict) -> bool:
    """Whether ``e`` loads a rank-1 View parameter's element ``index``."""
    return _loads_at(e, index) and e.view in views and views[e.view].ndim == 1


def _read_at(found: list, tops, index: str, views: dict) -> None:
    """Add to ``found`` the rank-1 Views that expressions ``tops`` read at ``index`` whatever the data (not only in
    a conditional expression's branches), each once."""
    for top in tops:
        for e in evaluated(top):
            if _at_index(e, index, views) and e.view not in found:
                found.append(e.view)


def sure_thread_loads(kernel: ir.Kernel, index: str) -> list[str]:
    """The rank-1 Views whose element ``index`` the body reads whatever the data: reads in its leading
    statements, up to the test of the first branch (what ``kf_prefetch`` asks for)."""
    found: list = []
    for stmt in kernel.body:
        if isinstance(stmt, (ir.Assign, ir.Accumulate, ir.SetField)):
            _read_at(found, (stmt.value,), index, kernel.views)
        elif isinstance(stmt, ir.Store):
            _read_at(found, (*stmt.indices, stmt.value), index, kernel.views)
        else:
            if isinstance(stmt, ir.If):
                _read_at(found, (stmt.test,), index, kernel.views)
            break
    return found


def leading_loads(kernel: ir.Kernel, index: str, bounds_check: bool) -> LeadingLoads:
    """The body's leading statements (assignments of locals and sums, then one store, up to the first other
    statement, one that assigns the thread index, or one with effects or a checked division) and the rank-1 Views
    they read at the thread index whatever the data: a store's value and indices are read before it stores.
    None of them under ``bounds_check``: checked loads stay where the body has them."""
    if bounds_check:
        return LeadingLoads(index, (), 0)
    views: list = []
    count = 0
    for stmt in kernel.body:
        stores = isinstance(stmt, ir.Store)
        if not (stores or isinstance(stmt, (ir.Assign, ir.Accumulate))) or getattr(stmt, "name", None) == index:
            break
        read = (stmt.value, *stmt.indices) if stores else (stmt.value,)
        if any(isinstance(e, _EFFECTS) or checked_division(e) for top in read for e in subexpressions(top)):
            break
        _read_at(views, read, index, kernel.views)
        count += 1
        if stores:
            break
    return LeadingLoads(index, tuple(views), count)


def loaded_struct(loads: LeadingLoads, views: dict) -> str:
    """``KfLoaded``: the leading loads of one element, a field each."""
    fields = " ".join(f"{views[v].dtype.cpp} l{k};" for k, v in enumerate(loads.views))
    return f"struct KfLoaded {{ {fields} }};" if fields else "struct KfLoaded {};"


def block_helpers(spec: KernelSpec, loads: LeadingLoads, prefetched: list, views: dict) -> str:
    """The functor's ``kf_load``, which loads an element's leading loads; on a CUDA device also ``kf_shfl_down_all``
    and ``kf_add``, which the block reduction moves and adds its sums with, and ``kf_prefetch``, which asks for the
    ``prefetched`` Views' elements ahead of the body."""
    i = ident(loads.index)
    loaded = ", ".join(element_code(ident(v), views[v].layout, [i], None, frozenset()) for v in loads.views)
    load = f"KfLoaded kf_load(const int64_t {i}) const {{ return {{{loaded}}}; }}\n"
    if spec.space != _DEVICE:
        return f"  KOKKOS_INLINE_FUNCTION {load}"
    if len(spec.accs) == 1:
        moved, added = "kf_shfl_down(v, o)", "dst += src;"
    else:
        fields = [f"a{k}" for k in range(len(spec.accs))]
        moved = "{" + ", ".join(f"kf_shfl_down(v.{f}, o)" for f in fields) + "}"
        added = " ".join(f"dst.{f} += src.{f};" for f in fields)
    asks = " ".join(f"kf_prefetch_l2(&{ident(v)}({i}));" for v in prefetched)
    return (f"  static __device__ value_type kf_shfl_down_all(const value_type& v, int o) {{ return {moved}; }}\n"
            f"  static __device__ void kf_add(value_type& dst, const value_type& src) {{ {added} }}\n"
            f"  __device__ {load}"
            f"  __device__ void kf_prefetch(const int64_t {i}) const {{ {asks} }}\n")
