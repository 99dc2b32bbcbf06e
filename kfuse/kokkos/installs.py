"""Which Kokkos kfuse compiles against, found with no setting.

Order: ``KFUSE_KOKKOS_ROOT`` when set (a site install; it must be valid, nothing else is tried), then the
Python environment's prefix (where scripts/setup.sh used to build Kokkos through pykokkos-base), then the
per-user installs ``python -m kfuse.kokkos install`` makes under ``<XDG_DATA_HOME>/kfuse/kokkos``. Among
those, a GPU Kokkos is chosen when the default space asks for one (KFUSE_DEFAULT_SPACE=Cuda or HIP) or
when a GPU is installed and a CUDA Kokkos exists; otherwise a host-only one (a CUDA Kokkos cannot even
initialise without a GPU).
"""
from __future__ import annotations

import functools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..errors import KfuseError

#: Written last by a per-user install: its presence marks the install complete and registers it.
MANIFEST = "kfuse-kokkos.json"
DEVICE_BACKENDS = ("CUDA", "HIP")
#: KokkosCore_config.h's backend names as kfuse's execution spaces spell them
NAMES = {"SERIAL": "Serial", "OPENMP": "OpenMP", "CUDA": "Cuda", "HIP": "HIP", "THREADS": "Threads"}
#: Present when an NVIDIA GPU (and its driver) is visible to this process.
GPU_MARKERS = (Path("/proc/driver/nvidia/gpus"), Path("/dev/nvidia0"))


@dataclass(frozen=True)
class Install:
    root: str
    include_dir: str
    lib_dir: str
    version: str      # KOKKOS_VERSION as Kokkos defines it, e.g. "30401"
    backends: tuple   # ("SERIAL", "OPENMP", ...) as enabled in KokkosCore_config.h
    origin: str       # "KFUSE_KOKKOS_ROOT", "sys.prefix" or "per-user"
    arch: str = ""    # the GPU architecture a per-user GPU install was built for

    @property
    def device(self) -> str:
        return next((b for b in DEVICE_BACKENDS if b in self.backends), "")


class KokkosNotFound(KfuseError):
    """No usable Kokkos where kfuse looks (or none with the GPU backend the default space needs)."""


def user_root() -> Path:
    return _under(config.data_home())


@functools.lru_cache(maxsize=8)
def _under(data_home: Path) -> Path:
    return data_home / "kfuse" / "kokkos"


def read(root: Path, origin: str, arch: str = "") -> Install | None:
    """The Kokkos installed under ``root``, or None when it has no headers or no ``libkokkoscore.so``."""
    include = next((d for d in (root / "include" / "kokkos", root / "include") if (d / "Kokkos_Core.hpp").exists()),
                   None)
    lib = next((d for d in (root / "lib", root / "lib64") if (d / "libkokkoscore.so").exists()), None)
    if include is None or lib is None or not (include / "KokkosCore_config.h").exists():
        return None
    config_h = (include / "KokkosCore_config.h").read_text()
    version = re.search(r"#define KOKKOS_VERSION (\d+)", config_h)
    backends = tuple(b for b in ("SERIAL", "OPENMP", "CUDA", "HIP", "THREADS")
                     if re.search(rf"^#define KOKKOS_ENABLE_{b}\b", config_h, re.M))
    return Install(str(root), str(include), str(lib), version.group(1) if version else "?", backends, origin, arch)


def per_user() -> list[Install]:
    """The complete per-user installs, newest Kokkos first."""
    found = []
    for manifest in sorted(user_root().glob(f"*/{MANIFEST}")):
        try:
            arch = json.loads(manifest.read_text()).get("arch", "")
        except (OSError, ValueError):
            continue
        install = read(manifest.parent, "per-user", arch)
        if install is not None:
            found.append(install)
    return sorted(found, key=lambda i: int(i.version) if i.version.isdigit() else 0, reverse=True)


def candidates() -> list[Install]:
    """Every install kfuse could use when KFUSE_KOKKOS_ROOT is not set, in the order they are preferred."""
    prefix = read(Path(sys.prefix), "sys.prefix")
    return ([prefix] if prefix else []) + per_user()


def gpu_present() -> bool:
    return any(m.exists() and (not m.is_dir() or any(m.iterdir())) for m in GPU_MARKERS)


def wanted_device() -> str:
    """The GPU backend the default space names ("CUDA", "HIP"), else ""."""
    space = config.DEFAULT_SPACE.get().upper()
    return space if space in DEVICE_BACKENDS else ""


def choose(found: list[Install], device: str, gpu: bool) -> Install | None:
    """The install to use among ``found`` (in preference order) for a default space needing ``device``."""
    if device:
        return next((i for i in found if device in i.backends), None)
    if gpu:
        cuda = next((i for i in found if "CUDA" in i.backends), None)
        if cuda is not None:
            return cuda
    return next((i for i in found if not i.device), found[0] if found else None)


def selected() -> Install:
    """The Kokkos to compile against now (cached per setting values; raises KokkosNotFound)."""
    return _selected(config.KOKKOS_ROOT.get(), wanted_device(), sys.prefix, str(user_root()))


@functools.lru_cache(maxsize=None)
def _selected(root: str, device: str, prefix: str, users: str) -> Install:
    if root:
        install = read(Path(root), "KFUSE_KOKKOS_ROOT")
        if install is None:
            raise KokkosNotFound(f"KFUSE_KOKKOS_ROOT={root} holds no Kokkos install (need include/Kokkos_Core.hpp, "
                                 "include/KokkosCore_config.h and lib/libkokkoscore.so); point it at a Kokkos "
                                 "install prefix, or unset it to use the one kfuse finds or builds")
        if device and device not in install.backends:
            raise KokkosNotFound(f"KFUSE_DEFAULT_SPACE={config.DEFAULT_SPACE.get()} needs a Kokkos built with "
                                 f"{device}, but KFUSE_KOKKOS_ROOT={root} has {', '.join(install.backends)}")
        return install
    install = choose(candidates(), device, gpu_present())
    if install is None:
        raise KokkosNotFound(not_found_message(device))
    return install


def forget() -> None:
    """Look again at the next ``selected()`` (after an install)."""
    _selected.cache_clear()


def not_found_message(device: str) -> str:
    looked = f"looked in {sys.prefix} (this Python environment) and {user_root()} (per-user installs)"
    if device == "CUDA":
        return (f"no Kokkos built with CUDA found for KFUSE_DEFAULT_SPACE={config.DEFAULT_SPACE.get()} ({looked}); "
                "build one with 'python -m kfuse.kokkos install --cuda --source <Kokkos 4 source folder or "
                "tarball>', or set KFUSE_KOKKOS_ROOT to a CUDA Kokkos install")
    if device:
        return (f"no Kokkos built with {device} found ({looked}); set KFUSE_KOKKOS_ROOT to a Kokkos install "
                f"built with {device}")
    return (f"no Kokkos found ({looked}); build one with 'python -m kfuse.kokkos install' (Kokkos 3.4.01, OpenMP "
            "and Serial, a few minutes, once per user), or set KFUSE_KOKKOS_ROOT to a Kokkos install")
