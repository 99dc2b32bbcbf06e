"""The on-disk kernel cache, exercised from separate processes (so in-process caches cannot interfere).

Each child process uses a private KFUSE_CACHE_DIR; the precompiled header is shared with the suite's
cache through a symlink, so these tests pay for kernel compiles only.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from kfuse.compiler import cache, toolchain

CHILD = textwrap.dedent('''
    import json, os, sys, time
    import numpy as np
    import kfuse as pk
    from kfuse.compiler import cache

    events = []
    cache.hooks.append(lambda event, name, key: events.append([event, name]))

    race_dir = os.environ.get("RACE_DIR")
    if race_dir:  # hold the compile of race_kernel until both processes have decided to compile it
        real_run = cache.subprocess.run

        def synced_run(cmd, **kwargs):
            cpp = next((c for c in cmd if str(c).endswith("kernel.cpp")), None)
            if cpp and "kfuse kernel race_kernel " in open(cpp).read():
                open(os.path.join(race_dir, "ready-%d" % os.getpid()), "w").close()
                deadline = time.time() + 120
                while len(os.listdir(race_dir)) < 2 and time.time() < deadline:
                    time.sleep(0.01)
            return real_run(cmd, **kwargs)

        cache.subprocess.run = synced_run

    @pk.workunit
    def race_kernel(i, x):
        x[i] = x[i] * 2 + i

    x = np.arange(100.0)
    pk.parallel_for(100, race_kernel, x=x)
    print(json.dumps({"ok": bool(np.array_equal(x, np.arange(100.0) * 3)), "events": events,
                      "stats": pk.stats(), "root": str(cache.cache_root())}))
''')


def run_child(script, cache_dir, **extra_env):
    env = {**os.environ, "KFUSE_CACHE_DIR": str(cache_dir), **extra_env}
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def result_of(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def entries(root):
    """name -> number of complete cache entries under ``root``."""
    counts = {}
    for meta in (root / "kernels").glob("*/*/meta.json"):
        name = json.loads(meta.read_text())["name"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def private_cache(tmp_path):
    """A new cache folder that shares the suite's precompiled header (built here if missing)."""
    root = tmp_path / "cache"
    pch = cache._ensure_pch(toolchain.current())
    if pch is not None:
        (root / "pch").mkdir(parents=True)
        (root / "pch" / pch.parent.name).symlink_to(pch.parent, target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """Two processes compiling race_kernel at the same moment into one private cache."""
    tmp = tmp_path_factory.mktemp("race")
    script = tmp / "child.py"
    script.write_text(CHILD)
    root = private_cache(tmp)
    race_dir = tmp / "barrier"
    race_dir.mkdir()
    procs = [run_child(script, root, RACE_DIR=str(race_dir)) for _ in range(2)]
    return script, root, [result_of(p) for p in procs]


def test_cache_dir_setting_moves_the_cache(raced):
    script, root, results = raced
    assert all(r["root"] == str(root) for r in results)
    assert entries(root).get("race_kernel") == 1
    shared = cache.cache_root()  # the suite's cache (tests/conftest.py): the children never wrote there
    assert shared != root and "race_kernel" not in entries(shared)


def test_concurrent_compiles_both_succeed_and_leave_one_entry(raced):
    script, root, results = raced
    assert [r["ok"] for r in results] == [True, True]
    for r in results:  # both really compiled (the barrier held them until both had missed the cache)
        assert ["compile", "race_kernel"] in r["events"]
    counts = entries(root)
    assert counts["race_kernel"] == 1 and counts["kfuse_runtime"] == 1
    assert not list((root / "tmp").iterdir())  # no half-built folders left behind
    for meta in (root / "kernels").glob("*/*/meta.json"):
        assert (meta.parent / "kernel.so").is_file() and (meta.parent / "kernel.cpp").is_file()


def test_second_process_loads_from_cache(raced):
    script, root, _ = raced
    again = result_of(run_child(script, root))
    assert again["ok"]
    assert again["stats"]["compiles"] == 0
    assert again["stats"]["cache_hits"] >= 2  # the runtime shim and the kernel
    assert ["hit", "race_kernel"] in again["events"]
    assert all(event == "hit" for event, _ in again["events"])


def test_clear_command_empties_the_cache(raced, tmp_path):
    _, root, _ = raced
    copy = tmp_path / "copy"
    shutil.copytree(root / "kernels", copy / "kernels")
    env = {**os.environ, "KFUSE_CACHE_DIR": str(copy)}

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "kfuse.compiler", *args], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert f"kernels: {sum(entries(root).values())}" in cli("info")
    assert str(copy) in cli("clear")
    assert not copy.exists() or not list(copy.rglob("meta.json"))
    assert "kernels: 0" in cli("info")
    assert entries(root)  # only the folder named by KFUSE_CACHE_DIR was cleared


@pytest.mark.parametrize("marker", ["meta.json", "ok"])  # a kernel entry / a precompiled-header entry
def test_publishing_an_entry_another_process_published_first_keeps_theirs(tmp_path, marker):
    final = tmp_path / "entries" / "key"
    builds = []
    for n in range(2):
        build = tmp_path / f"build{n}"
        build.mkdir()
        (build / marker).write_text(str(n))
        builds.append(build)
    cache._publish(builds[0], final, marker=marker)
    cache._publish(builds[1], final, marker=marker)  # the loser of the race: no error, its copy discarded
    assert (final / marker).read_text() == "0"
    assert not builds[0].exists() and not builds[1].exists()
