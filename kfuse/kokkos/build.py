"""Build a Kokkos with CMake into the per-user folder, once, under a lock.

Host build (the default): the Kokkos 3.4.01 from the pykokkos-base 0.0.7 sdist, OpenMP + Serial, shared
libraries, C++17, Release. CUDA is forced off because machines with nvcc and no GPU exist, and g++ 12 needs
``-include cstdint -include limits`` for this Kokkos; CMake 4 needs CMAKE_POLICY_VERSION_MINIMUM for its old
minimum version. CUDA build (``cuda=True``): a Kokkos 4 source the user gives, patched (``cuda_fixes``),
CUDA + OpenMP + Serial, compiled through its own bin/nvcc_wrapper for one GPU architecture.

An install is complete when its manifest (``installs.MANIFEST``) exists: it is written last, so a build that
failed or was killed leaves a folder that the next install replaces. The build runs in a temporary folder; its
full output goes to ``<per-user folder>/<name>.log``.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import config, progress
from ..errors import KfuseError
from . import cuda_fixes, installs, sources

BUNDLED_VERSION = "3.4.01"
#: nvcc architecture -> the Kokkos_ARCH_<name> option that selects it
CUDA_ARCHES = {"sm_60": "PASCAL60", "sm_61": "PASCAL61", "sm_70": "VOLTA70", "sm_72": "VOLTA72",
               "sm_75": "TURING75", "sm_80": "AMPERE80", "sm_86": "AMPERE86", "sm_87": "AMPERE87",
               "sm_89": "ADA89", "sm_90": "HOPPER90", "sm_100": "BLACKWELL100", "sm_120": "BLACKWELL120"}


class BuildError(KfuseError):
    """Kokkos could not be configured, built or installed."""


@dataclass(frozen=True)
class Plan:
    """Everything one Kokkos build needs, and the exact commands it runs."""
    source: Path
    prefix: Path
    build_dir: Path
    version: str
    cuda: bool = False
    arch: str = ""
    cxx: str = "g++"
    jobs: int = 1
    cmake: str = "cmake"
    ninja: str = ""

    @property
    def backends(self) -> tuple:
        return ("CUDA", "OPENMP", "SERIAL") if self.cuda else ("OPENMP", "SERIAL")

    def configure(self) -> list[str]:
        cmd = [self.cmake, "-S", str(self.source), "-B", str(self.build_dir), f"-DCMAKE_INSTALL_PREFIX={self.prefix}",
               "-DCMAKE_INSTALL_LIBDIR=lib", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON",
               "-DCMAKE_CXX_STANDARD=17", "-DKokkos_ENABLE_SERIAL=ON", "-DKokkos_ENABLE_OPENMP=ON",
               "-DCMAKE_POLICY_VERSION_MINIMUM=3.5"]
        if self.ninja:
            cmd += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={self.ninja}"]
        if self.cuda:
            return cmd + ["-DKokkos_ENABLE_CUDA=ON", f"-DKokkos_ARCH_{CUDA_ARCHES[self.arch]}=ON",
                          f"-DCMAKE_CXX_COMPILER={self.source / cuda_fixes.WRAPPER}"]
        return cmd + ["-DKokkos_ENABLE_CUDA=OFF", "-DKokkos_ENABLE_HIP=OFF", f"-DCMAKE_CXX_COMPILER={self.cxx}",
                      "-DCMAKE_CXX_FLAGS=-include cstdint -include limits"]

    def build(self) -> list[str]:
        return [self.cmake, "--build", str(self.build_dir), "--parallel", str(self.jobs)]

    def install(self) -> list[str]:
        return [self.cmake, "--install", str(self.build_dir)]


def install_name(version: str, backends: tuple) -> str:
    """The per-user folder's name: "3.4.01-openmp-serial", "4.6.99-cuda-openmp-serial"."""
    return "-".join([version, *(b.lower() for b in backends)])


def complete(prefix: Path) -> bool:
    return (prefix / installs.MANIFEST).is_file() and installs.read(prefix, "per-user") is not None


def tools() -> tuple[str, str]:
    """(cmake, ninja or ""): the binaries of the cmake and ninja Python packages kfuse depends on, else PATH's."""
    try:
        import cmake
        found = Path(cmake.CMAKE_BIN_DIR) / "cmake"
    except (ImportError, AttributeError):
        found = None
    cmake_bin = str(found) if found and found.exists() else shutil.which("cmake")
    if cmake_bin is None:
        raise BuildError("cmake not found: install it with 'pip install cmake' (a kfuse dependency)")
    try:
        import ninja
        ninja_bin = str(Path(ninja.BIN_DIR) / "ninja")
    except (ImportError, AttributeError):
        ninja_bin = ""
    if not ninja_bin or not Path(ninja_bin).exists():
        ninja_bin = shutil.which("ninja") or ""
    return cmake_bin, ninja_bin


def detect_arch(run=subprocess.run) -> str:
    """The first GPU's architecture as nvcc names it ("sm_90"), from nvidia-smi."""
    try:
        proc = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                   text=True, timeout=60)
        cap = proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout.split() else ""
    except (OSError, subprocess.TimeoutExpired):
        cap = ""
    if not re.fullmatch(r"\d+\.\d+", cap):
        raise BuildError("cannot tell this machine's GPU architecture (nvidia-smi gave none): pass --arch, "
                         f"e.g. --arch sm_90 (known: {', '.join(CUDA_ARCHES)})")
    return "sm_" + cap.replace(".", "")


def check_arch(arch: str) -> str:
    if arch not in CUDA_ARCHES:
        raise BuildError(f"unknown GPU architecture {arch!r} for --arch; known: {', '.join(CUDA_ARCHES)}")
    return arch


def existing_host() -> installs.Install | None:
    """A host Kokkos kfuse already uses without building one: KFUSE_KOKKOS_ROOT's, or one in sys.prefix."""
    root = config.KOKKOS_ROOT.get()
    if root:
        found = installs.read(Path(root), "KFUSE_KOKKOS_ROOT")
        if found is None:
            raise BuildError(f"KFUSE_KOKKOS_ROOT={root} holds no Kokkos install, and kfuse uses no other while it "
                             "is set: unset it to build and use the per-user one")
        return found
    return next((i for i in installs.candidates() if i.origin == "sys.prefix" and not i.device), None)


def install(source: Path | None = None, cuda: bool = False, arch: str = "", jobs: int = 0, force: bool = False,
            say=print) -> installs.Install:
    """Build and register a Kokkos in the per-user folder, or return the one already there (``force``: rebuild).
    ``say`` gets the lines worth printing whatever the terminal (start, waiting, done)."""
    if cuda and source is None:
        raise BuildError("a CUDA Kokkos is built from a Kokkos 4 source you give: python -m kfuse.kokkos install "
                         "--cuda --source <Kokkos 4 source folder or tarball> [--arch sm_90]")
    if cuda:
        arch = check_arch(arch or detect_arch())
    backends = ("CUDA", "OPENMP", "SERIAL") if cuda else ("OPENMP", "SERIAL")
    root = installs.user_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create the per-user Kokkos folder {root} ({exc.strerror or exc}): set "
                         "XDG_DATA_HOME to a folder of yours, or KFUSE_KOKKOS_ROOT to a Kokkos install") from exc
    with tempfile.TemporaryDirectory(prefix="kfuse-kokkos-") as work:
        work = Path(work)
        if source is None:
            version, src = BUNDLED_VERSION, None  # downloaded only if it must be built
        else:
            src = sources.from_path(Path(source), work)
            version = sources.version(src)
        if cuda and int(version.split(".")[0]) < 4:
            raise BuildError(f"--cuda needs a Kokkos 4 source; {source} holds Kokkos {version}")
        prefix = root / install_name(version, backends)
        with _locked(root / f".{prefix.name}.lock", say):
            if complete(prefix) and not force:
                built_for = json.loads((prefix / installs.MANIFEST).read_text()).get("arch", "")
                if built_for != arch:
                    raise BuildError(f"{prefix} was built for {built_for}, not {arch}: add --force to rebuild it "
                                     f"for {arch}")
                installs.forget()
                return installs.read(prefix, "per-user", arch)
            if src is None:
                say(f"kfuse: downloading {sources.BUNDLE} (the Kokkos {version} source) with pip")
                src = sources.bundled(work)
            if cuda:
                src = _patched_copy(src, work, arch, say)
            cmake_bin, ninja_bin = tools()
            plan = Plan(src, prefix, work / "build", version, cuda, arch, config.CXX.get(),
                        jobs or len(os.sched_getaffinity(0)), cmake_bin, ninja_bin)
            shutil.rmtree(prefix, ignore_errors=True)
            _run(plan, root / f"{prefix.name}.log", say)
            _register(plan, str(source) if source else sources.BUNDLE)
    installs.forget()
    return installs.read(prefix, "per-user", arch)


def _patched_copy(src: Path, work: Path, arch: str, say) -> Path:
    """A copy of ``src`` (the user's files stay as they are) with the CUDA fixes and ``arch`` in nvcc_wrapper."""
    copy = work / "cuda-src"
    shutil.copytree(src, copy, symlinks=True)
    for fix, outcome in cuda_fixes.apply(copy).items():
        say(f"kfuse: CUDA 13 fix '{fix}': {outcome}")
    cuda_fixes.set_default_arch(copy, arch)
    (copy / cuda_fixes.WRAPPER).chmod(0o755)
    return copy


def _run(plan: Plan, log_path: Path, say) -> None:
    what = f"Kokkos {plan.version} ({', '.join(installs.NAMES[b] for b in plan.backends)})"
    say(f"kfuse: building {what} into {plan.prefix} ({plan.jobs} jobs; log: {log_path})")
    start = time.monotonic()
    with open(log_path, "w") as log, progress.BOARD.task(f"building {what}: configuring") as task:
        for step, cmd in (("configuring", plan.configure()), ("compiling", plan.build()),
                          ("installing", plan.install())):
            task.label = f"building {what}: {step}"
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in proc.stdout:
                log.write(line)
                count = re.match(r"\[\s*(\d+)/(\d+)\]|\[\s*(\d+)%\]", line)
                if count and step == "compiling":
                    done = f"{count[1]}/{count[2]}" if count[1] else f"{count[3]}%"
                    task.label = f"building {what}: compiling [{done}]"
            if proc.wait() != 0:
                log.flush()
                tail = "".join(log_path.read_text().splitlines(keepends=True)[-25:])
                raise BuildError(f"{step} {what} failed (exit status {proc.returncode}); the full log is "
                                 f"{log_path}:\n{tail}")
    say(f"kfuse: built {what} in {progress.elapsed(time.monotonic() - start)}")


def _register(plan: Plan, origin: str) -> None:
    manifest = {"version": plan.version, "backends": list(plan.backends), "arch": plan.arch, "source": origin, "cxx": plan.cxx, "built": time.strftime("%Y-%m-%d %H:%M:%S"),
                "python": sys.executable}
    tmp = plan.prefix / (installs.MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, plan.prefix / installs.MANIFEST)


@contextmanager
def _locked(path: Path, say):
    """One build per install folder at a time, across processes (flock: released if the holder dies)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"kfuse: waiting for another process building Kokkos ({path.name[1:-5]})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
