"""The pending trace and its dependency walk.

Each logged call carries the byte ranges it reads and writes (from the workunit's access summary and
the Views' memory bounds), so Views that share memory (subviews, two Views over one buffer) are the
same data. To satisfy a host access, ``partition_for`` walks the trace backwards from the calls that
produce (or touch) the accessed memory and collects every earlier call they depend on: read-after-
write, write-after-write and write-after-read (a call about to overwrite data that an earlier pending
call still has to read pulls that reader in). Everything else stays pending.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right


class Ranges:
    """A set of byte ranges kept as sorted, disjoint, merged intervals, so testing an access against
    everything a walk has collected costs a binary search, not a scan (a long chain stays linear). A range
    ``add_all`` meets again once it is in the set is also kept as given (``exact``): a loop's calls touch the
    same Views again and again, and such a range then costs a set lookup."""

    __slots__ = ("starts", "ends", "exact")

    def __init__(self):
        self.starts: list = []
        self.ends: list = []
        self.exact: set = set()  # non-empty ranges, as (lo, hi), that add_all found already in the set

    def add(self, lo: int, hi: int) -> bool:
        """Add [lo, hi); whether it was in the set already."""
        if lo >= hi:  # an empty View touches no memory
            return False
        starts, ends = self.starts, self.ends
        i = bisect_left(ends, lo)  # first interval ending at or after lo: it touches or follows [lo, hi)
        if i < len(starts) and starts[i] <= lo and hi <= ends[i]:
            return True
        j = bisect_right(starts, hi)  # intervals i..j-1 touch [lo, hi): merge them all into one
        if i < j:
            lo = min(lo, starts[i])
            hi = max(hi, ends[j - 1])
        starts[i:j] = [lo]
        ends[i:j] = [hi]
        return False

    def add_all(self, ranges) -> None:
        exact = self.exact
        for bounds in ranges:
            if not (exact and bounds in exact) and self.add(*bounds):
                exact.add(bounds)

    def hits(self, ranges) -> bool:
        """Whether any of ``ranges`` shares a byte with the set."""
        exact = self.exact
        if exact and not exact.isdisjoint(ranges):
            return True
        starts, ends = self.starts, self.ends
        for lo, hi in ranges:
            if lo < hi:
                i = bisect_right(ends, lo)  # first interval ending after lo
                if i < len(starts) and starts[i] < hi:
                    return True
        return False


class Entry:
    """A call in the trace with its memory footprint."""

    __slots__ = ("call", "reads", "writes", "number")

    def __init__(self, call, reads: tuple, writes: tuple, number: int = 0):
        self.call = call  # calls.KernelCall
        self.reads = reads  # ((lo, hi), ...)
        self.writes = writes
        self.number = number  # order of arrival in the trace


def footprint(call) -> tuple:
    """(reads, writes): the byte ranges of the Views ``call`` reads and writes, from its access summary."""
    reads, writes = call.prepared.view_positions
    args = call.args
    return tuple([args[i].bounds for i in reads]), tuple([args[i].bounds for i in writes])


class Trace:
    def __init__(self):
        self.entries: list[Entry] = []
        # The bytes the first ``_counted`` pending calls write, and those they read or write: made when a walk
        # asks, extended as calls are appended, dropped when entries leave. A host access (or a call that must
        # run at once) touching none of them needs no walk: a loop of statements that each read an input's
        # element on the host, or each run at once on escaped memory, walked the whole trace every time.
        self._written: Ranges | None = None
        self._touched: Ranges | None = None
        self._counted, self._last = 0, -1  # entries counted, and the arrival number of the last of them
        self.arrivals = 0  # the arrival number the next entry gets

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, call) -> Entry:
        reads, writes = call.prepared.view_positions  # footprint(call), without a call on every kernel call
        args = call.args
        entry = Entry(call, tuple([args[i].bounds for i in reads]), tuple([args[i].bounds for i in writes]),
                      self.arrivals)
        self.arrivals += 1
        self.entries.append(entry)
        return entry

    def _footprints(self, upto: int) -> tuple:
        """(bytes written, bytes read or written) by the first ``upto`` entries."""
        counted = self._counted
        if self._written is None or counted > upto or counted and self.entries[counted - 1].number != self._last:
            self._written, self._touched, self._counted = Ranges(), Ranges(), 0
        written, touched = self._written, self._touched
        for entry in self.entries[self._counted:upto]:
            written.add_all(entry.writes)
            touched.add_all(entry.writes)
            touched.add_all(entry.reads)
        self._counted = upto
        self._last = self.entries[upto - 1].number if upto else -1
        return written, touched

    def _alone(self, bounds: tuple | None, write: bool, calls: tuple) -> list | None:
        """The walk's answer where it is plain without walking: [] for a host access to bytes no pending call
        writes (or, for a write, touches); [the call] for the newest call alone when nothing before it writes
        what it reads or touches what it writes. None otherwise."""
        if not calls and bounds is not None:
            written, touched = self._footprints(len(self.entries))
            return [] if not (touched if write else written).hits((bounds,)) else None
        if bounds is None and len(calls) == 1 and self.entries and self.entries[-1].call is calls[0] \
                and not calls[0].futures:
            last = self.entries[-1]
            written, touched = self._footprints(len(self.entries) - 1)
            if not written.hits(last.reads) and not touched.hits(last.writes):
                return [last]
        return None

    def partition_for(self, bounds: tuple | None, write: bool, calls: tuple = ()) -> list[Entry]:
        """Entries that must run, in trace order, before the host reads (or writes) ``bounds``.

        ``calls``: calls that must run regardless (e.g. the producer of a Future being read).
        """
        found = self._alone(bounds, write, calls)
        if found is not None:
            return found
        needed_ids = {id(c) for c in calls}
        need_reads, need_writes = Ranges(), Ranges()  # what the picked calls (and the host) read / write
        if bounds is not None:
            need_reads.add(*bounds)
            if write:
                need_writes.add(*bounds)
        picked = []
        reads_hit, writes_hit = need_reads.hits, need_writes.hits
        for entry in reversed(self.entries):
            call, writes = entry.call, entry.writes
            if not (id(call) in needed_ids or reads_hit(writes) or writes_hit(writes) or writes_hit(entry.reads)):
                continue
            picked.append(entry)
            need_reads.add_all(entry.reads)
            need_writes.add_all(writes)
            for _, fut in call.futures:
                if fut.call is not None:
                    needed_ids.add(id(fut.call))
        picked.reverse()
        return picked

    def remove(self, entries: list[Entry]) -> None:
        gone = {id(e) for e in entries}
        if len(entries) == 1 and self.entries and self.entries[-1] is entries[0]:
            self.entries.pop()  # a call that ran at once: no pass over the trace
        else:
            self.entries = [e for e in self.entries if id(e) not in gone]
        if any(e.number <= self._last for e in entries):  # the footprints no longer describe the first entries
            self._written = self._touched = None
            self._counted, self._last = 0, -1

    def clear(self) -> None:
        """Forget every entry without running it (benchmarks of the logging path)."""
        self.entries = []
        self._written = self._touched = None
        self._counted, self._last = 0, -1
