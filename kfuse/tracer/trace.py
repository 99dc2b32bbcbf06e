"""The pending trace and its dependency walk.

Each logged call carries the byte ranges it reads and writes (from the workunit's access summary and
the Views' memory bounds), so Views that share memory (subviews, two Views over one buffer) are the
same data. To satisfy a host access, ``partition_for`` walks the trace backwards from the calls that
produce (or touch) the accessed memory and collects every earlier call they depend on: read-after-
write, write-after-write and write-after-read (a call about to overwrite data that an earlier pending
call still has to read pulls that reader in). Everything else stays pending.
"""
from __future__ import annotations

from dataclasses import dataclass


def _overlaps(ranges_a, ranges_b) -> bool:
    for lo, hi in ranges_a:
        for lo2, hi2 in ranges_b:
            if lo < hi2 and lo2 < hi:
                return True
    return False


@dataclass(eq=False)
class Entry:
    """A call in the trace with its memory footprint."""

    seq: int
    call: object  # runtime.dispatch.KernelCall
    reads: tuple  # ((lo, hi), ...)
    writes: tuple


class Trace:
    def __init__(self):
        self.entries: list[Entry] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, call) -> Entry:
        access = call.prepared.access
        reads, writes = [], []
        for (name, t), arg in zip(call.prepared.spec.params, call.args):
            if not t.is_view:
                continue
            pa = access[name]
            if pa.read:
                reads.append(arg.bounds)
            if pa.write:
                writes.append(arg.bounds)
                arg.version += 1
        self._seq += 1
        entry = Entry(self._seq, call, tuple(reads), tuple(writes))
        self.entries.append(entry)
        return entry

    def partition_for(self, bounds: tuple | None, write: bool, calls: tuple = ()) -> list[Entry]:
        """Entries that must run, in trace order, before the host reads (or writes) ``bounds``.

        ``calls``: calls that must run regardless (e.g. the producer of a Future being read).
        """
        needed_ids = {id(c) for c in calls}
        need_reads: set = set()
        need_writes: set = set()
        if bounds is not None:
            need_reads.add(bounds)
            if write:
                need_writes.add(bounds)
        picked = []
        for entry in reversed(self.entries):
            call = entry.call
            take = id(call) in needed_ids \
                or _overlaps(entry.writes, need_reads) or _overlaps(entry.writes, need_writes) \
                or _overlaps(entry.reads, need_writes)
            if not take:
                continue
            picked.append(entry)
            need_reads.update(entry.reads)
            need_writes.update(entry.writes)
            for _, fut in call.futures:
                if fut.call is not None:
                    needed_ids.add(id(fut.call))
        picked.reverse()
        return picked

    def remove(self, entries: list[Entry]) -> None:
        gone = {id(e) for e in entries}
        self.entries = [e for e in self.entries if id(e) not in gone]

    def take_all(self) -> list[Entry]:
        entries, self.entries = self.entries, []
        return entries
