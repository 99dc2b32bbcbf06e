"""The Kokkos kfuse compiles against, provided on first use when none is found.

Decision: with no Kokkos found, the first kernel builds the host one (what ``python -m kfuse.kokkos install``
builds), once per user, showing progress. Why: ``pip install kfuse`` must be enough to run a kernel. A wheel
cannot carry a Kokkos fitted to the user's compiler and kernels must link the same libkokkoscore.so they were
compiled against, while this build needs only what kfuse needs anyway (g++, cmake and ninja from PyPI, and the
pykokkos-base sdist from the package index); it costs a few minutes once, and its first line says what is
happening and how to do it ahead. ``KFUSE_KOKKOS_AUTO_INSTALL=0`` makes a missing Kokkos an error naming the
command instead (batch jobs that must not start a build, machines without the network). A GPU Kokkos is never
built on its own: it needs a Kokkos 4 source the user names, so a GPU default space without one is an error.
"""
from __future__ import annotations

import sys

from .. import config
from . import build, installs


def selected() -> installs.Install:
    try:
        return installs.selected()
    except installs.KokkosNotFound:
        if installs.wanted_device() or config.KOKKOS_ROOT.get() or not config.KOKKOS_AUTO_INSTALL.get():
            raise
    say(f"kfuse: no Kokkos found in {sys.prefix} or {installs.user_root()}: building one now, once for this user "
        "('python -m kfuse.kokkos install' does this ahead; KFUSE_KOKKOS_AUTO_INSTALL=0 makes this an error)")
    build.install(say=say)
    return installs.selected()


def say(line: str) -> None:
    """Lines about a build kfuse starts on its own go to stderr, unless KFUSE_QUIET=1."""
    if not config.QUIET.get():
        print(line, file=sys.stderr, flush=True)
