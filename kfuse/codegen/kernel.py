"""Assemble one C++ translation unit for a kernel: helpers, a Kokkos functor, and a C entry point.

The entry point ``kfuse_launch(args, out, err, errlen)`` reads its arguments from a packed buffer of
8-byte slots (policy bounds, then per parameter: pointer + extents (+ strides) for a View, or one
value for a scalar), so Python calls it through ctypes with a single ``struct.pack`` and no binding
library; this keeps both compile time and per-call overhead low. It returns 0, or 1 with a C++ exception's
message in ``err``, or 2 with the record of a kernel fault (``errors.kernel_fault`` reads it). It waits for the
kernel (a fence) and times it. A GPU ``parallel_for`` that cannot fault also has ``kfuse_launch_queued``, which
returns once the kernel is queued on the device; where the kernel's only checked operations divide by its scalar
arguments or take team scratch memory of extents known before the launch, that entry checks those on the host
first (a divisor neither 0 nor -1, every ScratchView sure to fit) and runs the waiting one if one could fault.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .. import config
from ..frontend.normalize import KernelSource
from ..frontend.spec import KernelSpec
from ..ir import nodes as ir
from ..ir.lower import lowered
from ..types import DType
from . import blocks
from .cxx_names import cpp_type, ident, view_type
from .lanes import lane_loops
from .printer import BodyPrinter, Unit

CODEGEN_VERSION = "7"
#: Spaces whose ``parallel_for`` kernels that cannot fault (no checked operation, or only divisions by their scalar
#: arguments and team scratch memory of constant or argument extents, checked on the host) and do not print also get
#: ``kfuse_launch_queued``: the launch without its fence, for replays that wait for the device once at the end
#: (kfuse/runtime/launch.py).
QUEUED_SPACES = frozenset({"Cuda", "HIP"})
_SPACES = {"OpenMP": ("Kokkos::OpenMP", "Kokkos::HostSpace"), "Serial": ("Kokkos::Serial", "Kokkos::HostSpace"),
           "Cuda": ("Kokkos::Cuda", "Kokkos::CudaSpace"), "HIP": ("Kokkos::Experimental::HIP",
                                                                 "Kokkos::Experimental::HIPSpace")}


@dataclass(frozen=True)
class GeneratedKernel:
    """C++ source plus how to pack its argument buffer (``slot_format``: struct codes, one per slot)."""

    name: str
    source: str
    slot_format: str
    result_format: str

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "slot_format": self.slot_format,
                "result_format": self.result_format}

    @classmethod
    def from_json(cls, data) -> GeneratedKernel:
        """Inverse of ``to_json``; ValueError for anything else (cache files are checked, never trusted)."""
        fields = ["name", "result_format", "slot_format", "source"]
        if not (isinstance(data, dict) and sorted(data) == fields and all(isinstance(data[f], str) for f in fields)):
            raise ValueError(f"not a generated kernel: {str(data)[:200]}")
        for fmt in (data["slot_format"], data["result_format"]):
            try:
                struct.calcsize("=" + fmt)
            except struct.error as exc:
                raise ValueError(f"not a generated kernel: bad struct format {fmt!r} ({exc})") from None
        return cls(data["name"], data["source"], data["slot_format"], data["result_format"])


def roles(src: KernelSource, spec: KernelSpec):
    """Split the kernel's parameters into thread indices / team, accumulators, last_pass flag, user params."""
    names = [a.arg for a in src.tree.args.args]
    n_index = 1 if spec.policy == "team" else spec.rank
    n_acc = len(spec.accs)
    n_flag = 1 if spec.op == "scan" else 0
    fixed = n_index + n_acc + n_flag
    user = [n for n, _ in spec.params]
    if len(names) < fixed or names[fixed:] != user:
        raise src.error(f"workunit parameters {names} do not fit a {spec.op} over a {spec.policy} policy of rank "
                        f"{spec.rank}", hint="parameters are: thread index(es), accumulator (reduce/scan), "
                                             "last_pass flag (scan), then your arguments")
    return names[:n_index], names[n_index:n_index + n_acc], names[n_index + n_acc:fixed]


def generate(src: KernelSource, spec: KernelSpec, kernel_name: str,
             restrict: frozenset = frozenset()) -> GeneratedKernel:
    """``restrict``: View parameters proven not to overlap any other; the body then moves into a function
    taking them as ``__restrict__`` pointers (PyFuser's Figure 6c)."""
    exec_space, mem_space = _SPACES[spec.space]
    index_names, acc_names, flag_names = roles(src, spec)
    in_function = bool(restrict) and spec.policy != "team" and spec.op != "scan"
    kernel = lowered(src, spec)
    bounds_check = config.BOUNDS_CHECK.get()
    in_blocks = blocks.in_blocks(spec)
    leading = blocks.leading_loads(kernel, kernel.threads[0][0], bounds_check) if in_blocks else None
    unit = Unit(kernel, frozenset(ident(n) for n in restrict) if in_function else frozenset(),
                bounds_check=bounds_check, lanes=lane_loops(kernel, spec, bounds_check), leading=leading)
    members = [f"  {cpp_type(t)} {ident(name)};" for name, t in spec.params]
    body_lines = BodyPrinter(unit, None, {} if in_function else kernel.scalars, kernel.views).body(kernel, "    ")
    if spec.policy == "team":
        members.append("  int64_t kf_scratch_bytes[4];  // set_scratch_size: per team, per thread; level 0, then 1")
    if any(isinstance(s, ir.ScratchView) for s in kernel.body):
        body_lines.insert(0, f"    KfScratch kf_scratch = kf_scratch_start(kf_scratch_bytes, "
                             f"{ident(index_names[0])}.team_size());")

    if spec.policy == "team":
        sig = [f"const member_type& {ident(index_names[0])}"]
    else:
        sig = [f"const int64_t {ident(n)}" for n in index_names]
    if in_blocks:
        sig.append("const KfLoaded& kf_in")
    preamble = []
    value_type = ""
    if spec.op == "reduce" and len(spec.accs) == 1:  # a scalar sum: Kokkos's own reducer (on GPUs, warp shuffles)
        sig.append("value_type& kf_acc")
        preamble = [f"    {spec.accs[0].cpp}& {ident(acc_names[0])} = kf_acc;"]
        value_type = f"  using value_type = {spec.accs[0].cpp};\n"
    elif spec.op == "reduce":
        sig.append("value_type& kf_acc")
        preamble = [f"    {d.cpp}& {ident(n)} = kf_acc.a{i};" for i, (n, d) in enumerate(zip(acc_names, spec.accs))]
        fields = " ".join(f"{d.cpp} a{i};" for i, d in enumerate(spec.accs))
        inits = " ".join(f"v.a{i} = {d.cpp}();" for i, d in enumerate(spec.accs))
        joins = " ".join(f"dst.a{i} += src.a{i};" for i in range(len(spec.accs)))
        value_type = (f"  struct value_type {{ {fields} }};\n"
                      f"  KOKKOS_INLINE_FUNCTION void init(value_type& v) const {{ {inits} }}\n"
                      "#if KOKKOS_VERSION >= 40000\n"  # Kokkos 4 dropped volatile joins; 3.x requires them
                      f"  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const {{ {joins} }}\n"
                      "#else\n"
                      f"  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src)"
                      f" const {{ {joins} }}\n"
                      "#endif\n")
    elif spec.op == "scan":
        sig += [f"{spec.accs[0].cpp}& {ident(acc_names[0])}", f"const bool {ident(flag_names[0])}"]
        value_type = f"  using value_type = {spec.accs[0].cpp};\n"

    body_function = []
    if in_function:
        body_function, body_lines = _body_function(spec, index_names, acc_names, unit.restrict, body_lines,
                                                   loaded=in_blocks)
    if in_blocks:
        prefetched = blocks.views_ahead(spec, kernel, leading.index)
        value_type += blocks.block_helpers(spec, leading, prefetched, kernel.views)
    functor = "\n".join([
        *([blocks.loaded_struct(leading, kernel.views)] if in_blocks else []),
        *body_function,
        "struct Functor {",
        "  using member_type = Kokkos::TeamPolicy<KfExec>::member_type;",
        *members,
        value_type.rstrip("\n"),
        f"  KOKKOS_FORCEINLINE_FUNCTION void operator()({', '.join(sig)}) const {{",
        *preamble,
        *body_lines,
        "  }",
        "};",
    ])

    slots, unpack = _launch_slots(spec)
    policy = _policy_expr(spec)
    checks = _team_size_guard(spec)
    if spec.policy == "team":  # built after the team size check: Kokkos aborts on a size it cannot run
        checks += [f"    const auto kf_policy = {policy};", *_scratch_guard()]
        policy = "kf_policy"
    if spec.op == "for":
        launch = ("    kf_for_in_lanes<KfExec>(kf_f, kf_b0, kf_e0);" if unit.lanes else
                  f'    Kokkos::parallel_for("{kernel_name}", kf_light({policy}), kf_f);')
        results = ""
    elif spec.op == "reduce":
        launch = ("    Functor::value_type kf_r{};\n" +
                  (f"    {blocks.launcher(spec)}(kf_f, kf_b0, kf_e0, kf_r);" if in_blocks else
                   f'    Kokkos::parallel_reduce("{kernel_name}", kf_light({policy}), kf_f, kf_r);'))
        fields = ["kf_r"] if len(spec.accs) == 1 else [f"kf_r.a{i}" for i in range(len(spec.accs))]
        results = "".join(_store_result(f, d, i) for i, (f, d) in enumerate(zip(fields, spec.accs)))
    else:
        launch = (f"    {spec.accs[0].cpp} kf_r = {spec.accs[0].cpp}();\n"
                  f'    Kokkos::parallel_scan("{kernel_name}", kf_light({policy}), kf_f, kf_r);')
        results = _store_result("kf_r", spec.accs[0], 0)
    result_format = "".join("d" if d.is_float else "q" for d in spec.accs)

    divisors, scratch = unit.host_checked_divisors(), unit.host_checked_scratch()
    queues = spec.op == "for" and spec.space in QUEUED_SPACES and divisors is not None and not unit.uses_printf

    def entry(name: str, waits: bool) -> list:
        """The C entry point ``name``: unpack, check, launch; when ``waits``, fence and time the launch, then return
        the results and any fault."""
        ending = [
            "    Kokkos::fence();",
            "    kfuse_last_ns = std::chrono::duration_cast<std::chrono::nanoseconds>("
            "std::chrono::steady_clock::now() - kf_t0).count();",
            *(["    std::fflush(stdout);"] if unit.uses_printf else []),
            results.rstrip("\n"),  # before the fault check: a fused kernel's other reductions stay usable
            *_fault_check(unit, spec)] if waits else []
        return [
            f'extern "C" int {name}(const char* kf_args, char* kf_out, char* kf_err, int64_t kf_errlen) {{',
            f"  using namespace kf_kernel_{ident(kernel_name)};",
            "  try {",
            "    Functor kf_f;",
            *unpack,
            *checks,
            *(["    auto kf_t0 = std::chrono::steady_clock::now();"] if waits else
              _divisors_check(divisors) + _scratch_check(scratch)),
            launch,
            *ending,
            "    return 0;",
            "  } catch (const std::exception& e) {",
            "    kf_report(kf_err, kf_errlen, e.what());",
            "  } catch (...) {",
            '    kf_report(kf_err, kf_errlen, "unknown C++ exception");',
            "  }",
            "  return 1;",
            "}",
        ]

    source = "\n".join([
        f"// kfuse kernel {kernel_name} (codegen {CODEGEN_VERSION})",
        f"// op={spec.op} policy={spec.policy} rank={spec.rank} space={spec.space}",
        "// params: " + ", ".join(f"{n}: {t}" for n, t in spec.params),
        f"namespace kf_kernel_{ident(kernel_name)} {{",  # kf_<name> could be a prelude helper (kf_floordiv)
        f"using KfExec = {exec_space};",
        f"using KfMem = {mem_space};",
        *unit.definitions(),
        functor,
        *_fault_sites(unit),
        "}  // namespace",
        "",
        'extern "C" int64_t kfuse_last_ns = 0;',
        *entry("kfuse_launch", True),
        *(entry("kfuse_launch_queued", False) if queues else []),
        "",
    ])
    return GeneratedKernel(name=kernel_name, source=source, slot_format="".join(slots), result_format=result_format)


def _divisors_check(divisors: list) -> list[str]:
    """The queued entry of a kernel whose checked divisions divide by scalar arguments: where one could fault
    (0 or -1), the waiting entry runs instead, and reports the fault."""
    if not divisors:
        return []
    unsafe = " || ".join(f"!kf_divisor_safe(kf_f.{ident(n)})" for n in divisors)
    return [f"    if ({unsafe}) return kfuse_launch(kf_args, kf_out, kf_err, kf_errlen);"]


def _scratch_check(views: list) -> list[str]:
    """The queued entry of a kernel taking team scratch memory: where a ScratchView might not fit (kfuse's count or
    Kokkos's allocator, the prelude's ``kf_scratch_sure``), the waiting entry runs instead, and reports the fault."""
    if not views:
        return []
    lines = ["    KfScratch kf_bound = kf_scratch_bound_start(kf_f.kf_scratch_bytes);"]
    for v in views:
        extents = ", ".join(str(x) if isinstance(x, int) else f"kf_f.{ident(x)}" for x in v.extents)
        lines.append(f"    if (!kf_scratch_sure(kf_bound, {v.level}, sizeof({v.element}), {extents})) "
                     "return kfuse_launch(kf_args, kf_out, kf_err, kf_errlen);")
    return lines


def _body_function(spec, index_names, acc_names, restrict, body_lines, loaded: bool):
    """The kernel body as a free function whose non-overlapping Views are ``__restrict__`` pointers,
    and the one-line operator() body that calls it (``loaded``: it takes the leading loads, codegen/blocks.py)."""
    params = [f"const int64_t {ident(n)}" for n in index_names] + (["const KfLoaded& kf_in"] if loaded else [])
    params += [f"{d.cpp}& {ident(n)}" for n, d in zip(acc_names, spec.accs)]
    call = [ident(n) for n in index_names] + (["kf_in"] if loaded else []) + [ident(n) for n in acc_names]
    for name, t in spec.params:
        c = ident(name)
        if c in restrict:
            params.append(f"{t.dtype.cpp}* __restrict__ {c}")
            # kf_-prefixed: a user name like 'A_s0' would clash with '<A>_s0' (fix, tests; ident() keeps kf_ free)
            params += [f"const int64_t kf_{c}_s{d}" for d in range(t.ndim)]
            params += [f"const int64_t kf_{c}_e{d}" for d in range(t.ndim)]
            call.append(f"{c}.data()")
            call += [f"static_cast<int64_t>({c}.stride({d}))" for d in range(t.ndim)]
            call += [f"static_cast<int64_t>({c}.extent({d}))" for d in range(t.ndim)]
        else:
            params.append(f"const {cpp_type(t)}& {c}" if t.is_view else f"{t.dtype.cpp} {c}")
            call.append(c)
    function = [f"KOKKOS_FORCEINLINE_FUNCTION void kf_body({', '.join(params)}) {{", *body_lines, "}"]
    return function, [f"    kf_body({', '.join(call)});"]


def _fault_sites(unit: Unit) -> list[str]:
    """The table a fault's site number indexes (kernels without checked operations have none)."""
    if not unit.fault_sites:
        return []
    return ["static const KfSite kf_sites[] = {", *(f"  {site.cpp()}," for site in unit.fault_sites), "};"]


def _fault_check(unit: Unit, spec: KernelSpec) -> list[str]:
    """After the fence: a faulting thread left a record; return it (code 2) for a Python exception."""
    if not unit.fault_sites:
        return []
    on_device = "true" if spec.space in ("Cuda", "HIP") else "false"
    return ["    KfFault kf_fault_seen;",
            f"    if (kf_take_fault({on_device}, kf_fault_seen)) {{",
            f"      kf_describe_fault(kf_err, kf_errlen, kf_sites, {len(unit.fault_sites)}, kf_fault_seen);",
            "      return 2;",
            "    }"]


def _team_size_guard(spec: KernelSpec) -> list[str]:
    """Kokkos aborts the process on a too-large team size; check first and throw (a LaunchError in Python)."""
    if spec.policy != "team":
        return []
    tag = "Kokkos::ParallelReduceTag" if spec.op == "reduce" else "Kokkos::ParallelForTag"
    return ["    if (kf_team_size > 0) {",
            f"      const int kf_max = Kokkos::TeamPolicy<KfExec>(1, 1).team_size_max(kf_f, {tag}());",
            '      if (kf_team_size > kf_max) throw std::runtime_error("TeamPolicy team_size " + '
            'std::to_string(kf_team_size) + " is larger than " + std::to_string(kf_max) + ", the most this '
            'execution space allows");',
            "    }"]


def _scratch_guard() -> list[str]:
    """Kokkos adds a team's scratch bytes up in an int; more would wrap (and on the host the process would try
    to allocate whatever that gives), so refuse the launch first (a LaunchError in Python)."""
    return ["    const int64_t kf_scratch_total = static_cast<int64_t>(kf_policy.scratch_size(0)) + "
            "2 * static_cast<int64_t>(kf_policy.scratch_size(1));",
            "    if (kf_scratch_total > std::numeric_limits<int>::max()) throw std::runtime_error(\"TeamPolicy scratch "
            "memory of \" + std::to_string(kf_scratch_total) + \" bytes per team (level 1 counted twice, as Kokkos "
            "sets it aside) is more than Kokkos can give (2**31 - 1)\");"]


def _store_result(expr: str, dtype: DType, index: int) -> str:
    slot_type = "double" if dtype.is_float else "int64_t"
    return (f"    {{ {slot_type} kf_v = static_cast<{slot_type}>({expr}); "
            f"std::memcpy(kf_out + {8 * index}, &kf_v, 8); }}\n")


def _policy_expr(spec: KernelSpec) -> str:
    if spec.policy == "range":
        return "Kokkos::RangePolicy<KfExec, Kokkos::IndexType<int64_t>>(kf_b0, kf_e0)"
    if spec.policy == "mdrange":
        b = ", ".join(f"kf_b{i}" for i in range(spec.rank))
        e = ", ".join(f"kf_e{i}" for i in range(spec.rank))
        return f"Kokkos::MDRangePolicy<KfExec, Kokkos::Rank<{spec.rank}>, Kokkos::IndexType<int64_t>>({{{b}}}, {{{e}}})"
    sizes = [f"Kokkos::{per}(kf_f.kf_scratch_bytes[{2 * level + i}])" for level in (0, 1)
             for i, per in enumerate(("PerTeam", "PerThread"))]
    return ("(kf_team_size > 0 ? Kokkos::TeamPolicy<KfExec>(kf_league, kf_team_size, kf_vector) "
            ": Kokkos::TeamPolicy<KfExec>(kf_league, Kokkos::AUTO, kf_vector))"
            f".set_scratch_size(0, {sizes[0]}, {sizes[1]}).set_scratch_size(1, {sizes[2]}, {sizes[3]})")


def _launch_slots(spec: KernelSpec):
    """The packed-argument layout (struct codes) and the C++ that unpacks it into the functor."""
    slots: list[str] = []
    lines: list[str] = []

    def take(code: str, ctype: str) -> str:
        slots.append(code)
        return f"kf_slot<{ctype}>(kf_args, {len(slots) - 1})"

    if spec.policy == "team":
        for n in ("kf_league", "kf_team_size", "kf_vector"):
            lines.append(f"    const int64_t {n} = {take('q', 'int64_t')};")
        lines += [f"    kf_f.kf_scratch_bytes[{i}] = {take('q', 'int64_t')};" for i in range(4)]
    else:
        for prefix in ("b", "e"):
            for i in range(spec.rank):
                lines.append(f"    const int64_t kf_{prefix}{i} = {take('q', 'int64_t')};")
    for name, t in spec.params:
        member = f"kf_f.{ident(name)}"
        if t.is_view:
            ptr = take("q", "int64_t")
            extents = [take("q", "int64_t") for _ in range(t.ndim)]
            if t.layout == "right":
                lines.append(f"    {member} = {view_type(t)}(reinterpret_cast<{t.dtype.cpp}*>({ptr}), "
                             f"{', '.join(extents)});")
            else:
                strides = [take("q", "int64_t") for _ in range(t.ndim)]
                pairs = ", ".join(f"{e}, {s}" for e, s in zip(extents, strides))
                lines.append(f"    {member} = {view_type(t)}(reinterpret_cast<{t.dtype.cpp}*>({ptr}), "
                             f"Kokkos::LayoutStride({pairs}));")
        elif t.dtype.is_float:
            lines.append(f"    {member} = static_cast<{t.dtype.cpp}>({take('d', 'double')});")
        else:
            lines.append(f"    {member} = static_cast<{t.dtype.cpp}>({take('q', 'int64_t')});")
    return slots, lines
