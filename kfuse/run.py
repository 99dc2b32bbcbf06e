"""``python -m kfuse run [--fusion] program.py [args...]``: run an unmodified PyKokkos program on kfuse.

The way to try kfuse on existing code without editing it: for this run only, ``import pykokkos`` (and
``from pykokkos import ...``) gives kfuse, and the program otherwise runs as ``python program.py`` would run it
(its argv, ``__name__ == "__main__"``, its directory first on sys.path, its exit status and tracebacks). No
package named ``pykokkos`` is installed anywhere.
"""
from __future__ import annotations

import argparse
import importlib.abc
import os
import runpy
import sys

import kfuse

from . import config, context, engine
from .fuser import explain

ALIAS = "pykokkos"


class _PykokkosSubmodules(importlib.abc.MetaPathFinder):
    """Refuses ``pykokkos.<sub>`` by name: without it the import system would look for the submodule in
    kfuse's own folder (``pykokkos`` is kfuse there) and load kfuse internals under PyKokkos's names."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(ALIAS + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r}: kfuse does not provide this PyKokkos "
                                      f"submodule yet (only 'import {ALIAS}' itself runs on kfuse)", name=fullname)
        return None


def alias_pykokkos() -> None:
    """Make ``pykokkos`` and its submodules resolve as above, for the rest of this process."""
    sys.modules[ALIAS] = kfuse
    sys.meta_path.insert(0, _PykokkosSubmodules())


def _parse(argv: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kfuse run",
                                     description="Run an unmodified PyKokkos program on kfuse.")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse kernels (same as KFUSE_FUSION=1)")
    parser.add_argument("--explain", action="store_true",
                        help="at the end, print to stderr which groups fusion formed and why calls split")
    parser.add_argument("program", help="the program's .py file")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")
    return parser.parse_args(argv)


def main(argv: list) -> None:
    """Run the program as its ``__main__``; an exception it lets escape is reported as the interpreter would
    (``sys.excepthook``, exit status 1) from the program's own frames, without this runner's (SystemExit and
    KeyboardInterrupt pass through as they are)."""
    options = _parse(argv)
    if options.fusion:
        config.put(config.FUSION, 1)  # children the program starts see it too, as with KFUSE_FUSION=1
        kfuse.enable_fusion()
    program = options.program  # as given: run_path makes it argv[0] and __file__ (``python`` makes __file__ absolute)
    if not os.path.isfile(program):
        sys.exit(f"python -m kfuse run: can't open file {program!r}")
    alias_pykokkos()
    sys.argv = [program, *options.args]
    if not sys.flags.safe_path:  # ``python -m`` put the working folder first; ``python program.py`` puts its own
        sys.path[0] = os.path.dirname(os.path.abspath(program))
    sink = context.current().record_sink = [] if options.explain else None
    try:
        runpy.run_path(program, run_name="__main__")
    except Exception as error:
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != program:
            tb = tb.tb_next
        if tb is not None:
            error.with_traceback(tb)
        sys.excepthook(type(error), error, error.__traceback__)
        sys.exit(1)
    finally:
        if sink is not None:
            _explain(sink)


def _explain(sink: list) -> None:
    """The ``--explain`` summary, once the work still pending has run (so its groups count too)."""
    try:
        engine.flush_all()
    finally:
        print(explain.summary(sink), file=sys.stderr)
