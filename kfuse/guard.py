"""The lock around kfuse's shared state, and what a process forked after Kokkos started may still do.

One re-entrant lock serialises tracing, flushing and launching across Python threads: Kokkos's host
backends are not safe to launch into from several threads at once, and the trace is shared. A kernel
call takes it once (about 0.1 us uncontended).

``fork()``: the lock is held across the fork, so the child never inherits it half-taken. libgomp's
thread pool does not survive a fork (the child hangs at its first parallel region), so in a child
forked after Kokkos started, OpenMP kernels run on the Serial backend of the same Kokkos (with a
warning); GPU spaces raise a clear error there (a CUDA context cannot cross a fork either), and the
child skips ``Kokkos::finalize``. Use ``multiprocessing``'s "spawn" start method for parallel children.
"""
from __future__ import annotations

import os
import threading

lock = threading.RLock()
#: True in a child forked after Kokkos was initialised by its parent.
forked_after_start = False
_started = False


def mark_started() -> None:
    global _started
    _started = True


def _after_fork_in_child() -> None:
    global lock, forked_after_start
    lock = threading.RLock()
    forked_after_start = forked_after_start or _started


os.register_at_fork(before=lambda: lock.acquire(), after_in_parent=lambda: lock.release(),
                    after_in_child=_after_fork_in_child)
