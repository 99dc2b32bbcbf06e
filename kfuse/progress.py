"""One status line on stderr while kfuse makes the user wait: kernel compiles and the Kokkos build.

Drawn only when stderr is a terminal and KFUSE_QUIET is not set, so logs, pipes and captured test output get
nothing. The line shows the newest task in flight (the header a first compile waits for, say), its elapsed time
and how many others run; one daemon thread redraws it every ``TICK`` seconds while any task runs, and erases it
when the last one ends.
"""
from __future__ import annotations

import itertools
import shutil
import sys
import threading
import time
from contextlib import contextmanager

from . import config

TICK = 0.25


def wanted(stream=None) -> bool:
    stream = stream or sys.stderr
    return not config.QUIET.get() and hasattr(stream, "isatty") and stream.isatty()


class Task:
    """A task on the line; its ``label`` may change while it runs (a build's step, say)."""

    def __init__(self, label: str):
        self.label = label
        self.start = time.monotonic()


class Board:
    def __init__(self, stream=None):
        self._stream = stream
        self._tasks: list[Task] = []
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None

    @property
    def stream(self):
        return self._stream or sys.stderr

    @contextmanager
    def task(self, label: str):
        """Show ``label`` and its elapsed time while the ``with`` body runs (nothing when not ``wanted``)."""
        task = Task(label)
        if not wanted(self.stream):
            yield task
            return
        with self._lock:
            self._tasks.append(task)
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, name="kfuse-progress", daemon=True)
                self._ticker.start()
        try:
            yield task
        finally:
            with self._lock:
                self._tasks.remove(task)
                if not self._tasks:
                    self._write("")

    def _tick(self) -> None:
        while True:
            with self._lock:
                if not self._tasks:
                    self._ticker = None
                    return
                self._write(self.text())
            time.sleep(TICK)

    def text(self) -> str:
        newest = self._tasks[-1]
        others = f", {len(self._tasks) - 1} more running" if len(self._tasks) > 1 else ""
        return f"kfuse: {newest.label}  {elapsed(time.monotonic() - newest.start)}{others}"

    def _write(self, text: str) -> None:
        width = shutil.get_terminal_size((100, 24)).columns - 1
        try:
            self.stream.write("\r" + text[:width] + "\x1b[K")
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away (closed stream): progress is not worth an error
            pass


class Batch:
    """Numbers the kernels of one compile_ahead batch as their builds start: "3 of 8"."""

    def __init__(self, total: int):
        self.total = total
        self._next = itertools.count(1)

    def number(self) -> str:
        return f"{next(self._next)} of {self.total}"


def elapsed(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


BOARD = Board()  # the process's one line
