"""GUPS (giga-updates per second, after HPCC RandomAccess): random updates of a large table.

The table holds table[k] = k. Each of ``batches`` rounds runs two kernels over ``n_updates`` threads:

    indices  idx[i] = hash(round * n_updates + i) & (table_size - 1)   (a 64-bit LCG step + xorshifts)
    update   table[idx[i]] += 1 + (i & 7)

``update`` is plain read-modify-write: two threads hitting one entry at once may lose an update, which
HPCC tolerates for up to 1% of the table. GUPS-atomic (``--atomic``) updates with ``pk.atomic_add`` and
is exact. The table is touched at data-dependent indices, so an update never fuses with another update;
``indices`` writes idx[i] only at the thread index.

    python examples/gups.py --size small|medium|large [--atomic] [--fusion]
"""
from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

import kfuse as pk

#: size -> (log2 table size, batches); each batch makes table_size updates (HPCC: 4 x table size in all)
SIZES = {"small": (16, 4), "medium": (22, 4), "large": (25, 4)}


@pk.workunit
def indices(i, idx, seed, mask):
    x: pk.uint64 = seed + i
    x = x * 6364136223846793005 + 1442695040888963407
    x ^= x >> 33
    x = x * 3935559000370003845
    x ^= x >> 29
    idx[i] = x & mask


@pk.workunit
def update(i, table, idx):
    table[idx[i]] += 1 + (i & 7)


@pk.workunit
def update_atomic(i, table, idx):
    pk.atomic_add(table, [idx[i]], 1 + (i & 7))


def run(size: str = "small", *, log_size: int | None = None, batches: int | None = None, atomic: bool = False,
        fusion: bool = False) -> dict:
    """Run the benchmark; returns the final table and the seconds taken."""
    log_size = log_size or SIZES[size][0]
    batches = batches or SIZES[size][1]
    table_size = 1 << log_size
    table = pk.from_numpy(np.arange(table_size, dtype=np.int64))
    idx = pk.empty(table_size, pk.int64)
    kernel = update_atomic if atomic else update
    start = time.perf_counter()
    with pk.fusion() if fusion else contextlib.nullcontext():
        for r in range(batches):
            pk.parallel_for("indices", table_size, indices, idx=idx, seed=r * table_size, mask=table_size - 1)
            pk.parallel_for("update", table_size, kernel, table=table, idx=idx)
    pk.fence()
    seconds = time.perf_counter() - start
    return {"table": table.copy(), "seconds": seconds, "table_size": table_size, "batches": batches,
            "updates": table_size * batches}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--atomic", action="store_true", help="GUPS-atomic: update with pk.atomic_add")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse kernel calls")
    parser.add_argument("--repeat", type=int, default=3, help="runs (the first includes compiling)")
    args = parser.parse_args(argv)
    for r in range(args.repeat):
        res = run(args.size, atomic=args.atomic, fusion=args.fusion)
        print(f"run {r}: {res['seconds']:.4f} s  ({res['updates'] / res['seconds'] / 1e9:.4f} GUPS)")
    print(f"table_size={res['table_size']} updates={res['updates']} atomic={args.atomic} fusion={args.fusion}")
    print(f"table checksum={int(res['table'].sum())}")


if __name__ == "__main__":
    main()
