"""Mapping Python identifiers and types to C++ spellings."""
from __future__ import annotations

from ..frontend.spec import ArgType
from ..ir.nodes import StructType, ViewType
from ..types import DType

CXX_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t
char32_t class compl const constexpr const_cast continue decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast return short signed sizeof static
static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename union
unsigned using virtual void volatile wchar_t while xor xor_eq main printf exp log sqrt pow abs min max std
Kokkos int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t""".split())
# Names the generated functor declares itself or Kokkos looks up in a functor (a data member named ``init`` would
# hide the reducer's ``init()``), and lower-case macros of the C/C++ headers kernels include.
GENERATED_NAMES = frozenset("""Functor member_type value_type KfExec KfMem init join final value_count
team_shmem_size shmem_size execution_space work_tag reference_type pointer_type array_layout size_type""".split())
LOWERCASE_MACROS = frozenset("errno stdin stdout stderr assert offsetof alloca math_errhandling".split())


def ident(name: str) -> str:
    """A C++-safe spelling of a Python identifier (keywords, macros and reserved names get a suffix).

    An all-capitals name (``NULL``, ``EOF``, ``NAN``, ``PATH_MAX``...) may be a macro of some header, so
    every such name is suffixed; the C++ then cannot be rewritten by the preprocessor.
    """
    if (name in CXX_KEYWORDS or name in GENERATED_NAMES or name in LOWERCASE_MACROS or name.startswith("kf_")
            or name.startswith("_") or (len(name) > 1 and name == name.upper())):
        return f"{name}_py"
    return name


def view_type(t: ArgType | ViewType, memory_space: str = "KfMem") -> str:
    """A View argument's C++ type; a ScratchView's lives in the execution space's scratch memory."""
    if getattr(t, "scratch", False):
        memory_space = "KfExec::scratch_memory_space"
    layout = "Kokkos::LayoutRight" if t.layout == "right" else "Kokkos::LayoutStride"
    return (f"Kokkos::View<{t.dtype.cpp}{'*' * t.ndim}, {layout}, {memory_space}, "
            f"Kokkos::MemoryTraits<Kokkos::Unmanaged>>")


def cpp_type(t) -> str:
    """The C++ type of a kernel argument (``ArgType``) or an IR value (``DType``, ``ViewType``, a classtype's
    ``StructType``)."""
    if isinstance(t, ArgType):
        return view_type(t) if t.is_view else t.dtype.cpp
    if isinstance(t, ViewType):
        return view_type(t)
    if isinstance(t, DType):
        return t.cpp
    if isinstance(t, StructType):
        return ident(t.name)
    raise TypeError(t)


def method_name(fn, index: int) -> str:
    """The C++ member function of classtype method instance ``index`` (``Particle.__init__`` -> ``kf_m0_init``):
    kf_-prefixed, so never a field's name (``ident`` keeps kf_ names free)."""
    return f"kf_m{index}_{fn.name.rsplit('.', 1)[-1].strip('_')}"
