"""Messages between MPI ranks (mpi4py) that keep each rank's trace right.

Each rank is one process with its own kfuse runtime and trace; MPI moves bytes behind the tracer's back, so
every message passes the same host barrier as a View access from Python (``views.host_barrier``):
- sending a View is a host read: the pending kernels that write it run first;
- receiving into a View is a host write: the pending kernels that read or write it run first, and kernels
  logged afterwards see the received data (they start a new partition of the trace).
The calls are blocking and hand MPI the View's own memory for the length of the call only, so the View is not
escaped (kfuse/escape.py) and later kernels on it are traced and fused as before. Data are raw buffers (mpi4py's
uppercase methods), never pickled. On a GPU space the barrier brings device data to the host and the next
kernel copies received data back: messages are staged through host memory (no CUDA-aware MPI).

mpi4py is optional: kfuse imports it only when one of these functions is called.
"""
from __future__ import annotations

import numpy as np

from .future import value
from .views import View, host_barrier

_OPS = ("sum", "max", "min")


def mpi():
    """mpi4py's ``MPI`` module (initialising MPI), or an ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError("kfuse.comm needs the package mpi4py and an MPI library: pip install mpi4py mpich "
                          "(or pip install 'kfuse[mpi]')") from exc
    return MPI


def world():
    """``MPI.COMM_WORLD``: every rank of the run (a single process without mpiexec)."""
    return mpi().COMM_WORLD


def local_rank(comm=None) -> int:
    """This rank's number among the ranks on its node (how ranks pick one GPU each)."""
    comm = comm or world()
    node = comm.Split_type(mpi().COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def _buffer(data, write: bool, what: str, overwrite: bool = False) -> np.ndarray:
    """The memory MPI reads (``write`` False) or fills (``overwrite``: every element): a View's array once its
    pending kernels are done with it, or a NumPy array as it is; contiguous, since MPI sends one block."""
    if isinstance(data, View):
        host_barrier(data, write, overwrite)
        data = data._array
    elif not isinstance(data, np.ndarray):
        raise TypeError(f"kfuse.comm.{what} must be a pk.View or a NumPy array, got {type(data).__name__}")
    if not data.flags.c_contiguous:
        raise ValueError(f"kfuse.comm.{what} must be contiguous (a whole View or a range of its rows), "
                         f"got strides {data.strides} for shape {data.shape}")
    return data


def sendrecv(send, dest: int, recv, source: int, comm=None, tag: int = 0) -> None:
    """Send ``send`` to rank ``dest`` and receive ``recv`` from rank ``source`` in one step (MPI_Sendrecv), as
    halo exchanges do. Either may be a pk.View (or a range of its rows, ``view[a:b]``) or a NumPy array; the
    received message must fill ``recv`` exactly. ``MPI.PROC_NULL`` as a rank skips that side."""
    MPI = mpi()
    comm = comm or world()
    out = _buffer(send, False, "sendrecv: send")
    into = _buffer(recv, True, "sendrecv: recv", overwrite=source != MPI.PROC_NULL)
    status = MPI.Status()
    comm.Sendrecv(out, dest=dest, sendtag=tag, recvbuf=into, source=source, recvtag=tag, status=status)
    if source != MPI.PROC_NULL and status.Get_count(MPI.BYTE) != into.nbytes:
        raise ValueError(f"kfuse.comm.sendrecv: rank {source} sent {status.Get_count(MPI.BYTE)} bytes, the "
                         f"receive buffer holds {into.nbytes}")


def allreduce(values, op: str = "sum", comm=None) -> np.ndarray:
    """The element-wise ``op`` ("sum", "max" or "min") over all ranks of ``values`` (numbers or the Futures of
    reductions, e.g. a rank's thermo sums), in float64, with one message for all of them. A Future's pending
    kernels run here (reductions over the same range together)."""
    if op not in _OPS:
        raise ValueError(f"kfuse.comm.allreduce: op must be one of {', '.join(_OPS)}, got {op!r}")
    MPI = mpi()
    data = np.array([float(value(v)) for v in values], dtype=np.float64)
    (comm or world()).Allreduce(MPI.IN_PLACE, data, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
    return data
