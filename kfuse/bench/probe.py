"""``python -m kfuse.bench.probe SUBJECT SIZE``: one process's first (compile or cache load) and second fused
run of a subject, as a JSON line; ``measure.compile_times`` runs it against a cold and a warm cache."""
from __future__ import annotations

import json
import sys
import time

import kfuse as pk

from . import subjects
from .measure import fusion_mode


def _timed(go) -> tuple:
    pk.reset_stats()
    start = time.perf_counter()
    with fusion_mode("o", "all"):
        go()
    return time.perf_counter() - start, pk.stats()


def main() -> None:
    name, size = sys.argv[1], sys.argv[2]
    start = time.perf_counter()
    go = subjects.load(name).prepare(size)
    setup = time.perf_counter() - start
    first, counts = _timed(go)
    steady, _ = _timed(go)
    print(json.dumps({"first_s": first, "steady_s": steady, "compiles": counts["compiles"],
                      "cache_hits": counts["cache_hits"], "setup_s": setup}))


if __name__ == "__main__":
    main()
