"""Kokkos source trees to build from: the Kokkos 3.4.01 bundled in the pykokkos-base 0.0.7 sdist on PyPI (the
default, downloaded with pip and checked against its known sha256), or a folder or tarball the user names."""
from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from ..errors import KfuseError

BUNDLE = "pykokkos-base==0.0.7"
BUNDLE_FILE = "pykokkos-base-0.0.7.tar.gz"
BUNDLE_SHA256 = "6339daced1e81a2748f381847d8717cd77d824407da3c263b9491b5630c642b0"
BUNDLE_KOKKOS = "pykokkos-base-0.0.7/external/kokkos"


class SourceError(KfuseError):
    """A Kokkos source could not be obtained or is not a Kokkos source."""


def download_command(dest: Path) -> list[str]:
    # --no-binary for pykokkos-base alone: its build requirements (cmake, scikit-build) come as wheels when pip
    # prepares the sdist's metadata, instead of being built from source.
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "pykokkos-base", "--dest",
            str(dest), BUNDLE]


def bundled(work: Path, run=subprocess.run) -> Path:
    """Download the pykokkos-base sdist into ``work``, check it, and return its Kokkos folder, extracted there."""
    if importlib.util.find_spec("pip") is None:
        raise SourceError(f"{sys.executable} has no pip to download {BUNDLE} with (an environment made without "
                          f"pip, by uv say): install pip into it, or download {BUNDLE_FILE} and pass it with --source")
    proc = run(download_command(work), capture_output=True, text=True)
    tarball = work / BUNDLE_FILE
    if proc.returncode != 0 or not tarball.exists():
        raise SourceError(f"could not download {BUNDLE} from the package index with pip (exit status "
                          f"{proc.returncode}):\n{(proc.stderr or proc.stdout).strip()[-2000:]}\nwith no network, "
                          f"download {BUNDLE_FILE} elsewhere and pass it with --source")
    return from_path(tarball, work)


def from_path(path: Path, work: Path) -> Path:
    """The Kokkos source folder in ``path``: a Kokkos source folder or tarball, or the pykokkos-base sdist
    (its external/kokkos). A tarball is extracted into ``work``; a folder is used where it is."""
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise SourceError(f"Kokkos source {path} does not exist")
    if path.is_file():
        if path.name == BUNDLE_FILE and _sha256(path) != BUNDLE_SHA256:
            raise SourceError(f"{path} is not the published {BUNDLE_FILE} (sha256 differs from {BUNDLE_SHA256})")
        path = _extract(path, work / "src")
    found = next((d for d in _places(path) if version(d) is not None), None)
    if found is None:
        raise SourceError(f"no Kokkos source in {path}: expected a CMakeLists.txt that sets Kokkos_VERSION_MAJOR "
                          "there, in a folder just below it, or in external/kokkos")
    return found


def version(source: Path) -> str | None:
    """"3.4.01" for a Kokkos source folder (as its CMakeLists.txt spells it), None for anything else."""
    cmakelists = source / "CMakeLists.txt"
    if not cmakelists.is_file():
        return None
    text = cmakelists.read_text(errors="replace")
    parts = [re.search(rf"set\(Kokkos_VERSION_{p}\s+(\d+)\)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None


def _places(path: Path) -> list[Path]:
    below = sorted(d for d in path.iterdir() if d.is_dir())
    return [path, path / "external" / "kokkos", *below, *(d / "external" / "kokkos" for d in below)]


def _extract(tarball: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tarball) as tar:
            members = [m for m in tar.getmembers() if not tarball.name == BUNDLE_FILE
                       or m.name.startswith(BUNDLE_KOKKOS + "/")]
            # the "data" filter (no links out, no device files) where this Python has it (3.10.12+, 3.11.4+)
            tar.extractall(dest, members=members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    except (tarfile.TarError, OSError) as exc:
        raise SourceError(f"cannot extract {tarball}: {exc}") from exc
    return dest


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
