"""Every KFUSE_* setting, declared once.

Nothing else in kfuse reads ``os.environ`` for its own settings: this module is the one place a
newcomer looks to learn what can be switched and whether a switch changes compiled binaries
(``in_cache_key``). Values are read when asked for, so tests may change the environment at run time.
"""
from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


_parsed: dict = {}  # setting name (each declared once, below) -> (its key in os.environ's mapping, the raw value
#                     parsed last, the value)
_UNSEEN = object()


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    doc: str
    in_cache_key: bool
    parse: Callable[[str], object] = str

    def get(self):
        """The value the environment gives now. Some settings are read at every kernel call, where
        ``os.environ.get`` (encoding the name, decoding the value) and parsing cost more than the rest of the
        check; so the raw value is looked up in the mapping ``os.environ`` keeps (``_data``, which
        ``os.environ.get`` reads too) and parsed only when it is not the object parsed last (kept alive
        here, so a changed value is always another object)."""
        environ = os.environ
        seen = _parsed.get(self.name)
        if seen is None:
            seen = (environ.encodekey(self.name), _UNSEEN, None)
        raw = environ._data.get(seen[0])
        if raw is seen[1]:
            return seen[2]
        text = None if raw is None else environ.decodevalue(raw)
        value = self.parse(self.default if text is None or text == "" else text)
        _parsed[self.name] = (seen[0], raw, value)
        return value


class Watch:
    """The raw environment values of some settings, read at once: while they and the runtime's own choices stand,
    the settings parsed from them stand too (``Setting.get`` parses only a value it has not seen). Cheaper than
    asking each setting, for a check made at every repetition of a loop (kfuse/rerun.py)."""

    def __init__(self, *settings: Setting):
        self._keys = tuple(os.environ.encodekey(s.name) for s in settings)

    def now(self) -> tuple:
        return tuple(map(os.environ._data.get, self._keys))


def _tristate(raw: str):
    """'0' forces off, '1' forces on, 'auto' leaves the program in charge."""
    if raw.lower() in ("1", "on", "true", "yes"):
        return True
    if raw.lower() in ("0", "off", "false", "no"):
        return False
    return None


def _flag(raw: str) -> bool:
    return raw.lower() in ("1", "on", "true", "yes")


def _one_of(name: str, modes: tuple) -> Callable[[str], str]:
    """A parser of setting ``name``'s value, which must be one of ``modes`` (any case)."""
    def parse(raw: str) -> str:
        mode = raw.lower()
        if mode not in modes:
            raise ValueError(f"{name}={raw!r}: expected one of {', '.join(modes)}")
        return mode
    return parse


PROFIT_MODES = ("off", "model", "measure")
ALIGN_MODES = ("none", "device", "all")


def data_home() -> Path:
    """Where per-user data lives (XDG_DATA_HOME, else ~/.local/share): kfuse keeps its Kokkos builds there."""
    return _data_home(os.environ.get("XDG_DATA_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _data_home(xdg: str | None, home: str | None) -> Path:
    """Made once per value of both variables (``Path.home()`` reads HOME): asked at every flush, through the Kokkos
    install the compile cost model looks up."""
    return Path(xdg or Path.home() / ".local" / "share")


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "kfuse")


CACHE_DIR = Setting("KFUSE_CACHE_DIR", _default_cache_dir(), "Where compiled kernels are kept.", False)
CACHE_FALLBACK = Setting(
    "KFUSE_CACHE_FALLBACK", "1", "When the cache folder cannot be trusted (another owner, writable by others) "
    "or written: 1 warns and uses a private temporary cache for the process, 0 raises CacheError.", False, _flag)
KOKKOS_ROOT = Setting(
    "KFUSE_KOKKOS_ROOT", "", "Kokkos install (include/, lib/) to compile against; default: one found in this Python "
    "environment's prefix, else a per-user one from 'python -m kfuse.kokkos install' (kfuse/kokkos/installs.py).",
    True)
KOKKOS_AUTO_INSTALL = Setting(
    "KFUSE_KOKKOS_AUTO_INSTALL", "1", "When no Kokkos is found at the first kernel: 1 builds the host Kokkos "
    "(python -m kfuse.kokkos install) there and then, once per user; 0 raises an error naming that command.", False,
    _flag)
CXX = Setting("KFUSE_CXX", "g++", "C++ compiler (default: g++, or Kokkos's nvcc_wrapper / hipcc for a GPU Kokkos).",
              True)
GPU_ARCH = Setting("KFUSE_GPU_ARCH", "", "GPU architecture for nvcc (-arch, e.g. sm_90) or hipcc (--offload-arch); "
                   "default: the compiler's own (nvcc_wrapper's default_arch).", True)
OPT_FLAGS = Setting("KFUSE_OPT_FLAGS", "-O3", "Optimisation flags for kernels.", True)
FUSION = Setting("KFUSE_FUSION", "auto", "0 forces eager execution, 1 traces and fuses an unmodified program.",
                 False, _tristate)
MAX_TRACE = Setting("KFUSE_MAX_TRACE", "4096", "Pending calls kept before the trace is flushed.", False, int)
MAX_GROUP = Setting(
    "KFUSE_MAX_GROUP", "64", "Most calls fused into one kernel, which holds at most 64 syntax nodes of kernel code per "
    "call of this bound (0: no bound); a group that reaches either ends on a whole repeating step, so a time-step loop "
    "runs one fused kernel again and again instead of one giant kernel.", False,
    int)
PROFIT = Setting(
    "KFUSE_PROFIT", "measure", "Whether a fused group runs fused (kfuse/fuser/profit.py): off fuses every group the "
    "fuser forms; model declines a group whose kernel would take longer to compile than it saves on the runs seen "
    "so far (fuser/cost.py); measure applies the model, then times a group that recurs fused and unfused on its "
    "first occurrences and keeps the faster, per group signature, in memory and in the cache folder.", False,
    _one_of("KFUSE_PROFIT", PROFIT_MODES))
PROFIT_TRIALS = Setting(
    "KFUSE_PROFIT_TRIALS", "3", "Occurrences of a group timed each way (fused, members apart, alternately) before "
    "KFUSE_PROFIT=measure decides, and repetitions of a repeated flush (rerun, untraced); up to three times as many "
    "while the two are within 5%. The best time of each side is compared.", False, int)
ALIGN_VIEWS = Setting(
    "KFUSE_ALIGN_VIEWS", "none", "Whether calls that reach one memory through different Views fuse where the Views' "
    "elements line up thread by thread (a matrix's columns written, its rows then read; kfuse/fuser/planner.py "
    "_aligned): none never (the default: the one workload measured, GaussianNB's array code, ran slower so on the host "
    "and on a GPU); device in partitions whose calls all run on a GPU, where a launch saved is host time; all on every "
    "space.", False, _one_of("KFUSE_ALIGN_VIEWS", ALIGN_MODES))
MAX_LOADED_KERNELS = Setting(
    "KFUSE_MAX_LOADED_KERNELS", "1024", "Kernel libraries kept loaded; loading one more unloads the least recently "
    "launched, which loads again at its next launch (each library costs about 5 of the process's ~65,000 memory "
    "mappings).", False, int)
TRANSFORMS = Setting("KFUSE_TRANSFORMS", "args,loops,restrict,memory",
                     "Comma-separated transforms applied to fused kernels, or 'none'.", True)


def _pool_default() -> int:
    """An eighth of the machine's memory, between 1 and 16 GiB: a pooled array nobody wrote has no pages, and a
    loop of array statements over large arrays keeps a result per statement pending (NSTREAM over 2^22 doubles:
    100 of 32 MiB), each beyond the pool costing an allocation and its release (20 us at that size)."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        memory = 8 << 30
    return min(max(memory // 8, 1 << 30), 16 << 30)


POOL_BYTES = Setting("KFUSE_POOL_BYTES", str(_pool_default()), "Bytes of memory kept for reuse by the results of "
                     "array operations (kfuse/buffers.py; default an eighth of the machine's memory, 1 to 16 GiB); "
                     "0 turns the pool off.", False, int)
DEVICE_POOL_BYTES = Setting("KFUSE_DEVICE_POOL_BYTES", str(2 << 30), "Bytes of GPU memory kept for reuse when the "
                            "View owning it goes (kfuse/runtime/device.py): a program that makes its arrays anew "
                            "each step allocates and frees no device memory once warm; 0 frees at once.", False, int)
HOST_ELEMENTS = Setting("KFUSE_HOST_ELEMENTS", "4096", "Element-wise array operations of at most this many result "
                        "elements, exact in NumPy (+ - * / sqrt, comparisons, logical, copies, fills), run at once "
                        "by NumPy on the host when the default space is a host one and nothing is pending "
                        "(kfuse/ops/on_host.py); 0 sends every operation to its kernel.", False, int)
DUMP_DIR = Setting("KFUSE_DUMP_DIR", "", "Write the C++ of every kernel compiled or loaded into this folder.", False)
DEBUG = Setting("KFUSE_DEBUG", "0", "Show kfuse's internal frames in errors and verify IR after each pass.", False,
                _flag)
DEFAULT_SPACE = Setting("KFUSE_DEFAULT_SPACE", "OpenMP", "Execution space of kernels launched without one: OpenMP, "
                        "Serial, Debug, Cuda or HIP (pk.set_default_space overrides it).", True)
BACKEND = Setting("KFUSE_BACKEND", "kokkos", "What runs kernels: kokkos (C++ Kokkos, compiled) or python (kfuse's "
                  "reference interpreter of the same kernels: no compiler needed, slow; for debugging and tests).", False)
NUM_THREADS = Setting("KFUSE_NUM_THREADS", "-1", "OpenMP threads for Kokkos (-1: Kokkos decides).", False, int)
QUIET = Setting("KFUSE_QUIET", "0", "1: no progress line on a terminal for kernel compiles and Kokkos builds "
                "(there is none when stderr is not a terminal).", False, _flag)
VERBOSE = Setting("KFUSE_VERBOSE", "0", "Log compiles and cache hits to stderr.", False, _flag)
BOUNDS_CHECK = Setting("KFUSE_BOUNDS_CHECK", "0", "1: every View access in a compiled kernel checks its indices "
                       "and an index outside 0 <= i < extent raises IndexError (read when a kernel is specialised).",
                       True, _flag)

ALL = (CACHE_DIR, CACHE_FALLBACK, KOKKOS_ROOT, KOKKOS_AUTO_INSTALL, CXX, GPU_ARCH, OPT_FLAGS, FUSION, MAX_TRACE,
       MAX_GROUP, PROFIT, PROFIT_TRIALS, POOL_BYTES, DEVICE_POOL_BYTES, MAX_LOADED_KERNELS, TRANSFORMS, DUMP_DIR,
       DEBUG, DEFAULT_SPACE, BACKEND, NUM_THREADS, QUIET, VERBOSE, BOUNDS_CHECK)


def put(setting: Setting, value) -> None:
    """Set ``setting`` for this process and the processes it starts (a tool's command-line switch)."""
    os.environ[setting.name] = str(value)


def put_foreign_default(name: str, value: str) -> None:
    """Set another library's environment variable ``name`` unless the user has (``python -m kfuse.bench --peers``
    keeps JAX from taking most of the GPU's memory)."""
    os.environ.setdefault(name, value)


@contextlib.contextmanager
def overridden(setting: Setting, value):
    """Run a block with ``setting`` at ``value`` (None: unchanged), then restore it."""
    if value is None:
        yield
        return
    old = os.environ.get(setting.name)
    put(setting, value)
    try:
        yield
    finally:
        if old is None:
            del os.environ[setting.name]
        else:
            os.environ[setting.name] = old


def child_environment(**values) -> dict:
    """The environment for a child process: this one's, with some settings changed (by Setting attribute
    name here, e.g. ``CACHE_DIR="/tmp/x"``)."""
    return dict(os.environ, **{globals()[name].name: str(value) for name, value in values.items()})


def prefer_unbound_openmp_threads() -> None:
    """libgomp reads OMP_PROC_BIND at start-up; binding threads to cores hurts on shared machines, so kfuse
    turns it off unless the user chose."""
    os.environ.setdefault("OMP_PROC_BIND", "false")


def cache_key() -> str:
    """The current values of every setting that changes generated code or binaries (``in_cache_key``),
    for caches that keep generated code without regenerating it."""
    return ";".join(f"{s.name}={s.get()}" for s in ALL if s.in_cache_key)
