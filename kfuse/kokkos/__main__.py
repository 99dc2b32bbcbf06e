"""``python -m kfuse.kokkos install|status``: build a Kokkos for kfuse, or show which ones it sees.

  install                     the host Kokkos 3.4.01 (OpenMP, Serial) from the pykokkos-base 0.0.7 sdist,
                              unless kfuse already has a host Kokkos (KFUSE_KOKKOS_ROOT, this environment's)
  install --source PATH       a host Kokkos from that source folder or tarball
  install --cuda --source PATH [--arch sm_90]
                              a CUDA + OpenMP + Serial Kokkos from a Kokkos 4 source (default arch: the GPU's)
  status                      the installs kfuse sees and the one it selects now
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import config
from ..errors import KfuseError
from . import build, installs


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m kfuse.kokkos", description="Build or inspect the Kokkos kfuse "
                                  "compiles kernels against.")
    verbs = top.add_subparsers(dest="verb", required=True)
    inst = verbs.add_parser("install", help="build a Kokkos into the per-user folder (once)")
    inst.add_argument("--cuda", action="store_true", help="CUDA + OpenMP + Serial (needs --source: a Kokkos 4)")
    inst.add_argument("--arch", default="", help="GPU architecture for --cuda, e.g. sm_90 (default: the GPU's, "
                      "from nvidia-smi)")
    inst.add_argument("--source", type=Path, help="Kokkos source folder or tarball (default: download the "
                      "pykokkos-base 0.0.7 sdist with pip and use its Kokkos 3.4.01)")
    inst.add_argument("--jobs", type=int, default=0, help="parallel compile jobs (default: one per usable CPU)")
    inst.add_argument("--force", action="store_true", help="build even if an install is already there")
    inst.add_argument("--quiet", action="store_true", help="print only errors")
    verbs.add_parser("status", help="the Kokkos installs kfuse sees and the one it selects")
    return top


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        return install(args) if args.verb == "install" else status()
    except KfuseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def install(args) -> int:
    if args.arch and not args.cuda:
        print("error: --arch is for --cuda builds", file=sys.stderr)
        return 2
    if args.quiet:
        config.put(config.QUIET, 1)  # no progress line either
    say = (lambda line: None) if args.quiet else print
    if not (args.cuda or args.source or args.force):
        found = build.existing_host()
        if found is not None:
            say(f"kfuse: using the Kokkos already in {found.root} ({found.origin}); nothing to build "
                "(--force builds the per-user one anyway)")
            return 0
    done = build.install(args.source, cuda=args.cuda, arch=args.arch, jobs=args.jobs, force=args.force, say=say)
    say(f"kfuse: Kokkos {_version(done)} ({', '.join(installs.NAMES[b] for b in done.backends)}) is installed in {done.root}")
    return 0


def status() -> int:
    print(f"per-user installs: {installs.user_root()}")
    root = config.KOKKOS_ROOT.get()
    seen = ([installs.read(Path(root), "KFUSE_KOKKOS_ROOT")] if root else []) + installs.candidates()
    for found in seen:
        if found is not None:
            arch = f", {found.arch}" if found.arch else ""
            print(f"  {found.origin:18} Kokkos {_version(found)} ({', '.join(installs.NAMES[b] for b in found.backends)}{arch})  {found.root}")
    if root and seen[0] is None:
        print(f"  KFUSE_KOKKOS_ROOT  {root}: no Kokkos install there")
    print(f"GPU present: {'yes' if installs.gpu_present() else 'no'}; default space: {config.DEFAULT_SPACE.get()}")
    try:
        chosen = installs.selected()
    except installs.KokkosNotFound as exc:
        print(f"selected: none ({exc})")
        return 1
    print(f"selected: {chosen.root} ({chosen.origin})")
    return 0


def _version(install: installs.Install) -> str:
    """KOKKOS_VERSION 30401 as 3.4.01, as Kokkos numbers its releases."""
    v = install.version
    return f"{int(v) // 10000}.{int(v) // 100 % 100}.{int(v) % 100:02d}" if v.isdigit() else v


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
