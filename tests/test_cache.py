"""The on-disk kernel cache, exercised from separate processes (so in-process caches cannot interfere).

Each child process uses a private KFUSE_CACHE_DIR; the precompiled header is shared with the suite's
cache through a symlink, so these tests pay for kernel compiles only. ``tests/test_cache_hostile.py``
reuses the child script and helpers for damaged and hostile caches.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from kfuse.compiler import cache, entries, toolchain

CHILD = textwrap.dedent('''
    import json, os, shutil, sys, time, warnings
    import numpy as np
    import kfuse as pk
    from kfuse.compiler import cache
    from kfuse.compiler.trust import CacheWarning

    events, warned = [], []
    cache.hooks.append(lambda event, name, key: events.append([event, name]))
    warnings.simplefilter("always", CacheWarning)
    warnings.showwarning = lambda message, *rest, **kw: warned.append(str(message))

    barrier = os.environ.get("BARRIER")  # a folder where processes meet
    if barrier:  # record that this process found race_kernel's lock taken
        cache.hooks.append(lambda event, name, key: event == "wait" and name == "race_kernel" and
                           open(os.path.join(barrier, "wait-%d" % os.getpid()), "w").close())

    hold = os.environ.get("HOLD", "")  # what happens while race_kernel compiles
    real_run = cache.subprocess.run

    def held_run(cmd, **kwargs):
        cpp = next((c for c in cmd if str(c).endswith("kernel.cpp")), None)
        if cpp and "kfuse kernel race_kernel " in open(cpp).read():
            if hold.startswith("waiters:"):  # until that many other processes wait for this compile
                deadline = time.time() + 120
                while len(os.listdir(barrier)) < int(hold[8:]) and time.time() < deadline:
                    time.sleep(0.01)
            elif hold == "vanish" and os.path.isdir(os.environ["KFUSE_CACHE_DIR"]):  # the cache is deleted under
                shutil.rmtree(os.environ["KFUSE_CACHE_DIR"])                         # its first compile
            elif hold == "hang":  # the test kills this process here
                open(os.path.join(barrier, "compiling"), "w").close()
                time.sleep(600)
        return real_run(cmd, **kwargs)

    cache.subprocess.run = held_run

    @pk.workunit
    def race_kernel(i, x):
        x[i] = x[i] * 2 + i

    x = np.arange(100.0)
    pk.parallel_for(100, race_kernel, x=x)
    ok = bool(np.array_equal(x, np.arange(100.0) * 3))

    if os.environ.get("FUSE"):  # two kernels fused into one: exercises the fused-kernel store too
        @pk.workunit
        def double_it(i, y, x):
            y[i] = 2.0 * x[i]

        @pk.workunit
        def add_one(i, z, y):
            z[i] = y[i] + 1.0

        pk.enable_fusion()
        a, b, c = pk.View([64]), pk.View([64]), pk.View([64])
        a[:] = np.arange(64.0)
        pk.parallel_for(64, double_it, y=b, x=a)
        pk.parallel_for(64, add_one, z=c, y=b)
        ok = ok and bool(np.array_equal(np.asarray(c), 2.0 * np.arange(64.0) + 1.0))
        ok = ok and pk.stats()["fused_kernels_launched"] == 1
    print(json.dumps({"ok": ok, "events": events, "warned": warned, "stats": pk.stats(),
                      "root": str(cache.cache_root())}))
''')


def child_script(folder):
    script = folder / "child.py"
    script.write_text(CHILD)
    return script


def run_child(script, cache_dir, umask=None, **extra_env):
    env = {**os.environ, "KFUSE_CACHE_DIR": str(cache_dir), **extra_env}
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=preexec)


def result_of(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def cli(root, *args, expect=0):
    """``python -m kfuse.compiler ARGS`` on the cache ``root``; returns its output."""
    env = {**os.environ, "KFUSE_CACHE_DIR": str(root)}
    proc = subprocess.run([sys.executable, "-m", "kfuse.compiler", *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc.stdout


def entries_by_name(root):
    """name -> number of complete, intact cache entries under ``root``."""
    counts = {}
    for meta in (root / "kernels").glob("*/*/meta.json"):
        assert entries.problem(meta.parent, "kernel", meta.parent.name) is None
        name = json.loads(meta.read_text())["name"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def entry_of(root, name):
    """The entry folder of the kernel ``name`` under ``root``."""
    found = [m.parent for m in (root / "kernels").glob("*/*/meta.json") if json.loads(m.read_text())["name"] == name]
    assert len(found) == 1, found
    return found[0]


def private_cache(tmp_path):
    """A new cache folder that shares the suite's precompiled header (built here if missing)."""
    root = tmp_path / "cache"
    pch = cache._ensure_pch(toolchain.current())
    root.mkdir(mode=0o700)
    if pch is not None:
        (root / "pch").mkdir(mode=0o700)
        (root / "pch" / pch.parent.name).symlink_to(pch.parent, target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """Two processes start race_kernel into one cold cache; whichever takes the lock holds its compile until the
    other is waiting for the lock."""
    tmp = tmp_path_factory.mktemp("race")
    script = child_script(tmp)
    root = private_cache(tmp)
    barrier = tmp / "barrier"
    barrier.mkdir()
    procs = [run_child(script, root, BARRIER=str(barrier), HOLD="waiters:1") for _ in range(2)]
    return script, root, [result_of(p) for p in procs]


def test_cache_dir_setting_moves_the_cache(raced):
    script, root, results = raced
    assert all(r["root"] == str(root) for r in results)
    assert entries_by_name(root).get("race_kernel") == 1
    shared = cache.cache_root()  # the suite's cache (tests/conftest.py): the children never wrote there
    assert shared != root
    assert not any(json.loads(m.read_text()).get("name") == "race_kernel" for m in shared.glob("kernels/*/*/meta.json"))


def test_concurrent_processes_compile_once_and_the_other_reuses(raced):
    script, root, results = raced
    assert [r["ok"] for r in results] == [True, True]
    events = [r["events"] for r in results]
    compiled = [e for e in events if ["compile", "race_kernel"] in e]
    waited = [e for e in events if ["wait", "race_kernel"] in e]
    assert len(compiled) == 1 and len(waited) == 1  # the compile was held until the other process waited
    assert waited[0].index(["wait", "race_kernel"]) < waited[0].index(["hit", "race_kernel"])
    assert all(r["warned"] == [] for r in results)
    counts = entries_by_name(root)
    assert counts["race_kernel"] == 1 and counts["kfuse_runtime"] == 1
    assert not list((root / "tmp").iterdir())  # no half-built folders left behind


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
    os.chmod(copy, 0o700)
    assert f"kernels: {sum(entries_by_name(root).values())}" in cli(copy, "info")
    assert str(copy) in cli(copy, "clear")
    assert not copy.exists() or not list(copy.rglob("meta.json"))
    assert "kernels: 0" in cli(copy, "info")
    assert entries_by_name(root)  # only the folder named by KFUSE_CACHE_DIR was cleared


def test_unknown_command_prints_usage(tmp_path):
    env = {**os.environ, "KFUSE_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "kfuse.compiler", "bogus"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "usage: python -m kfuse.compiler [info|clear|verify]" in proc.stderr


def test_folders_and_files_are_private_even_under_umask_000(tmp_path):
    root = tmp_path / "parent" / "cache"  # the missing parent is created 0700 too
    result = result_of(run_child(child_script(tmp_path), root, umask=0, FUSE="1"))
    assert result["ok"] and result["root"] == str(root)
    for path in [root.parent, *root.parent.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_symlink():
            continue
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert list(root.glob("fused/*/*.json"))  # the fused kernel was stored, privately


def test_publish_replaces_whatever_occupies_the_slot(tmp_path):
    """The caller holds the entry's lock, so anything in the slot is damage: it goes, the new build stays."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    damaged = tmp_path / "kernels" / "ab" / "abcd"
    damaged.mkdir(parents=True)
    (damaged / "kernel.so").write_bytes(b"\x7fELF truncated")
    junk_shard = tmp_path / "kernels" / "cd"
    junk_shard.write_text("a file where a folder belongs")
    for final in (damaged, junk_shard / "cdef"):
        build = tmp / f"kernel-{final.name}-x"
        build.mkdir()
        (build / "kernel.so").write_bytes(b"new")
        entries.publish(build, final, tmp)
        assert (final / "kernel.so").read_bytes() == b"new" and not build.exists()
    assert not list(tmp.iterdir())  # what was moved aside was deleted
