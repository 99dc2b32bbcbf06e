"""Hostile and damaged compile caches: no planted code runs, every damaged entry is rebuilt, no process crashes.

Every scenario runs real child processes (``test_cache.CHILD``: race_kernel, plus a fused pair with FUSE=1)
against a copy of one warmed private cache, damaged or planted on purpose. The suite runs as root here, so
"another user's cache" is made with os.chown to an unused uid, and "read-only" with things root cannot
write through: a path under a regular file, a regular file as the cache, and an immutable (chattr +i)
folder.
"""
import json
import os
import pickle
import shutil
import signal
import subprocess
import time

import pytest
from marks import GPU_KOKKOS, uses_pch

from kfuse.compiler import entries
from kfuse.compiler import fused as fused_entries
from test_cache import child_script, cli, entries_by_name, entry_of, private_cache, result_of, run_child

OTHER_UID = 4242  # no such user here: stands for "another user"

PLANTED_SO = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
  const char* path = getenv("PLANT_MARKER");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (f) { fputs("planted code ran\n", f); fclose(f); }
}
"""


class _RunsShell:
    """Unpickling this runs a shell command: what a planted pickle in the old cache could do."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A private cache holding race_kernel, the runtime shim, the two fused members and the fused kernel."""
    tmp = tmp_path_factory.mktemp("warm")
    root = private_cache(tmp)
    result = result_of(run_child(child_script(tmp), root, FUSE="1"))
    assert result["ok"] and result["warned"] == []
    return root


@pytest.fixture
def copy(warm, tmp_path):
    """A fresh copy of the warm cache to damage, and the child script."""
    root = tmp_path / "cache"
    shutil.copytree(warm, root, symlinks=True)
    return root, child_script(tmp_path)


@pytest.fixture(scope="module")
def planted_so(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    (folder / "planted.c").write_text(PLANTED_SO)
    subprocess.run(["gcc", "-shared", "-fPIC", str(folder / "planted.c"), "-o", str(folder / "planted.so")],
                   check=True)
    return folder / "planted.so"


def plant_binary(entry, planted_so):
    """Put the planted library in the entry and record its hash, as an attacker able to write there would."""
    shutil.copy(planted_so, entry / "kernel.so")
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"]["kernel.so"] = entries.sha256(entry / "kernel.so")
    (entry / "meta.json").write_text(json.dumps(meta))


def give_away(path, uid=OTHER_UID):
    """chown -R without following links (the pch link points into the suite's own cache)."""
    os.lchown(path, uid, uid)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, uid)


def damaged_run(script, root, tmp_path, **env):
    """Run the child on ``root``; returns its result and whether planted code ran."""
    marker = tmp_path / "planted-code-ran"
    result = result_of(run_child(script, root, PLANT_MARKER=str(marker), **env))
    return result, marker.exists()


# --- code execution from the cache ---------------------------------------------------------------------------
def test_planted_pickle_never_runs_and_the_fused_entry_is_rebuilt(copy, tmp_path):
    root, script = copy
    [stored] = root.glob("fused/*/*.json")
    marker = tmp_path / "pickle-ran"
    payload = pickle.dumps(_RunsShell(f"touch {marker}"))
    stored.write_bytes(payload)  # where the fused entry is read from
    stored.with_suffix(".pickle").write_bytes(payload)  # where kfuse used to read it from
    result = result_of(run_child(script, root, FUSE="1"))
    assert result["ok"] and not marker.exists()
    assert any(str(stored) in w and "is damaged" in w for w in result["warned"])
    assert fused_entries.problem(stored) is None  # rewritten as valid JSON
    assert result["stats"]["compiles"] == 0  # the fused kernel's binary was still cached and intact


@pytest.mark.parametrize("owner", ["another user", "this user, mode 777"])
def test_planted_binary_in_an_untrusted_cache_never_loads(copy, tmp_path, planted_so, owner):
    root, script = copy
    for meta in root.glob("kernels/*/*/meta.json"):
        plant_binary(meta.parent, planted_so)
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.chmod(folder, 0o777)
    if owner == "another user":
        give_away(root)
    result, planted_ran = damaged_run(script, root, tmp_path, FUSE="1")
    assert result["ok"] and not planted_ran
    assert result["root"] != str(root)  # a private cache served this process
    [warning] = result["warned"]
    reason = f"owned by uid {OTHER_UID}" if owner == "another user" else "writable by other users (mode 777)"
    assert str(root) in warning and reason in warning and "private cache" in warning


def test_untrusted_cache_without_fallback_is_a_clear_error(copy, tmp_path, planted_so):
    root, script = copy
    plant_binary(entry_of(root, "race_kernel"), planted_so)
    give_away(root)
    marker = tmp_path / "planted-code-ran"
    proc = run_child(script, root, PLANT_MARKER=str(marker), KFUSE_CACHE_FALLBACK="0")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and not marker.exists()
    assert f"CacheError: kfuse cache {root} is owned by uid {OTHER_UID}" in err
    assert "python -m kfuse.compiler verify" in err


def test_planted_entry_inside_a_trusted_cache_is_rebuilt(copy, tmp_path, planted_so):
    """A cache made by an older kfuse under umask 000 had 0777 subfolders: another user could add entries."""
    root, script = copy
    entry = entry_of(root, "race_kernel")
    plant_binary(entry, planted_so)
    give_away(entry)
    result, planted_ran = damaged_run(script, root, tmp_path)
    assert result["ok"] and not planted_ran
    assert ["repair", "race_kernel"] in result["events"] and ["compile", "race_kernel"] in result["events"]
    assert any(f"is owned by uid {OTHER_UID}" in w and "rebuilding" in w for w in result["warned"])
    assert entry.stat().st_uid == os.geteuid() and entries_by_name(root)["race_kernel"] == 1


# --- damaged entries --------------------------------------------------------------------------------------------
def _truncate(entry, other):
    data = (entry / "kernel.so").read_bytes()
    (entry / "kernel.so").write_bytes(data[: len(data) // 2])


def _empty(entry, other):
    (entry / "kernel.so").write_bytes(b"")


def _swap_binary(entry, other):
    shutil.copy(other / "kernel.so", entry / "kernel.so")


def _swap_entry(entry, other):
    for name in ("kernel.so", "kernel.cpp", "meta.json"):
        shutil.copy(other / name, entry / name)


def _meta_not_json(entry, other):
    (entry / "meta.json").write_text('{"format": 2, "kind": "kern')


def _meta_missing(entry, other):
    (entry / "meta.json").unlink()


def _entry_is_a_file(entry, other):
    shutil.rmtree(entry)
    entry.write_text("junk where an entry belongs")


def _shard_is_a_file(entry, other):
    shutil.rmtree(entry.parent)
    entry.parent.write_text("junk where a folder of entries belongs")


@pytest.mark.parametrize("damage", [_truncate, _empty, _swap_binary, _swap_entry, _meta_not_json, _meta_missing,
                                    _entry_is_a_file, _shard_is_a_file], ids=lambda f: f.__name__.strip("_"))
def test_damaged_entry_is_rebuilt(copy, damage):
    root, script = copy
    entry, other = entry_of(root, "race_kernel"), entry_of(root, "kfuse_runtime")
    damage(entry, other)
    result = result_of(run_child(script, root))
    assert result["ok"]
    assert ["compile", "race_kernel"] in result["events"]
    if damage is not _shard_is_a_file:  # there the entry is simply absent: compiled, no warning needed
        assert ["repair", "race_kernel"] in result["events"]
        [warning] = result["warned"]
        assert warning.startswith(f"kfuse cache entry {entry} ") and warning.endswith(": rebuilding it")
    assert entries_by_name(root)["race_kernel"] == 1  # and every entry is intact
    again = result_of(run_child(script, root))  # the repaired entry is used as it is
    assert again["ok"] and again["stats"]["compiles"] == 0 and again["warned"] == []


@uses_pch
def test_damaged_precompiled_header_is_rebuilt(copy):
    root, script = copy
    [link] = (root / "pch").iterdir()
    target = link.resolve()
    link.unlink()
    shutil.copytree(target, link)  # a real copy to damage, not the suite's own header
    gch = link / "kfuse_prelude.hpp.gch"
    gch.write_bytes(gch.read_bytes()[:1000000])  # g++ fails on every compile with this
    shutil.rmtree(entry_of(root, "race_kernel"))  # a compile, so the header is needed
    result = result_of(run_child(script, root))
    assert result["ok"] and ["compile", "race_kernel"] in result["events"]
    assert any(str(link) in w and "kfuse_prelude.hpp.gch that does not match" in w for w in result["warned"])
    assert entries.problem(link, "pch", link.name) is None


def test_junk_folders_do_not_disturb_and_stale_builds_are_swept(copy):
    root, script = copy
    (root / "tmp" / "junk-folder").mkdir()
    (root / "tmp" / "junk-folder" / "x.o").write_bytes(b"junk")
    orphan = root / "tmp" / f"kernel-{'0' * 64}-abc123"  # a build whose process died: nobody holds its lock
    orphan.mkdir()
    (root / "kernels" / "zz" / "not-a-key").mkdir(parents=True)
    (root / "fused" / "zz").write_text("junk")
    shutil.rmtree(entry_of(root, "race_kernel"))  # a compile, which sweeps tmp/
    result = result_of(run_child(script, root, FUSE="1"))
    assert result["ok"] and result["warned"] == []
    assert not list((root / "tmp").iterdir())


# --- read-only and vanished caches -----------------------------------------------------------------------------
def _under_a_file(tmp_path):
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file" / "cache"


def _is_a_file(tmp_path):
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file"


@pytest.mark.parametrize("where", [_under_a_file, _is_a_file], ids=["path under a file", "path is a file"])
def test_unwritable_cache_falls_back_to_a_private_one(tmp_path, where):
    root = where(tmp_path)
    script = child_script(tmp_path)
    result = result_of(run_child(script, root))
    assert result["ok"] and result["root"] != str(root)
    [warning] = result["warned"]
    assert warning.startswith(f"kfuse cache {root} ") and "private cache" in warning
    proc = run_child(script, root, KFUSE_CACHE_FALLBACK="0")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and f"CacheError: kfuse cache {root} " in err


def test_immutable_cache_falls_back_to_a_private_one(copy):
    """chattr +i: a read-only folder even for root (the test needs a file system with that attribute)."""
    root, script = copy
    if subprocess.run(["chattr", "+i", str(root)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here; the other read-only cases still run")
    try:
        result = result_of(run_child(script, root))
    finally:
        subprocess.run(["chattr", "-i", str(root)], check=True)
    assert result["ok"] and result["root"] != str(root)
    [warning] = result["warned"]
    assert warning.startswith(f"kfuse cache {root} is read-only: this process uses the private cache")


def test_cache_deleted_during_a_compile_falls_back(tmp_path):
    root = private_cache(tmp_path)
    result = result_of(run_child(child_script(tmp_path), root, HOLD="vanish"))
    assert result["ok"] and result["root"] != str(root)
    [warning] = result["warned"]
    assert "failed while in use" in warning and "private cache" in warning


# --- processes dying and racing ---------------------------------------------------------------------------------
def test_kill_9_during_a_compile_leaves_nothing_that_blocks(tmp_path):
    root = private_cache(tmp_path)
    script = child_script(tmp_path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    victim = run_child(script, root, BARRIER=str(barrier), HOLD="hang")
    deadline = time.time() + 120
    while not (barrier / "compiling").exists() and time.time() < deadline and victim.poll() is None:
        time.sleep(0.05)
    assert (barrier / "compiling").exists(), victim.communicate()[1]
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    assert [p.name.split("-")[0] for p in (root / "tmp").iterdir()] == ["kernel"]  # the orphan build folder
    result = result_of(run_child(script, root))
    assert result["ok"] and ["compile", "race_kernel"] in result["events"]
    assert ["wait", "race_kernel"] not in result["events"]  # the dead process's lock went with it
    assert not list((root / "tmp").iterdir())


def test_four_processes_racing_on_a_cold_cache_compile_each_entry_once(tmp_path):
    root = tmp_path / "cold"  # not even the precompiled header: that is raced for too
    script = child_script(tmp_path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [run_child(script, root, BARRIER=str(barrier), HOLD="waiters:3") for _ in range(4)]
    results = [result_of(p) for p in procs]
    assert all(r["ok"] and r["warned"] == [] for r in results)
    events = [tuple(e) for r in results for e in r["events"]]
    assert events.count(("compile", "race_kernel")) == 1 and events.count(("compile", "kfuse_runtime")) == 1
    assert events.count(("wait", "race_kernel")) == 3 and events.count(("hit", "race_kernel")) == 3
    assert entries_by_name(root) == {"race_kernel": 1, "kfuse_runtime": 1}
    if not GPU_KOKKOS:  # nvcc and hipcc take the prelude as a plain -include: no precompiled header
        [pch] = (root / "pch").iterdir()
        assert entries.problem(pch, "pch", pch.name) is None
    assert not list((root / "tmp").iterdir())


# --- python -m kfuse.compiler verify ------------------------------------------------------------------------
def test_verify_repairs_a_damaged_cache(copy, tmp_path):
    root, script = copy
    race, runtime = entry_of(root, "race_kernel"), entry_of(root, "kfuse_runtime")
    _truncate(race, None)  # its kernel.cpp still matches its key: rebuilt at once
    (runtime / "kernel.cpp").write_text("// not this entry's source")
    _empty(runtime, None)  # its source is gone too: removed, rebuilt when next needed
    [stored] = root.glob("fused/*/*.json")
    stored.write_text(stored.read_text().replace('"rank": 1', '"rank": 2'))  # still JSON, but not what was hashed
    stored.with_suffix(".pickle").write_bytes(pickle.dumps(_RunsShell(f"touch {tmp_path / 'ran'}")))
    (root / "kernels" / "zz").mkdir()
    (root / "tmp" / f"kernel-{'0' * 64}-abc123").mkdir()
    (root / "failed").mkdir(mode=0o777)
    os.chmod(root / "failed", 0o777)
    (root / "failed" / "planted.log").write_text("")
    os.lchown(root / "failed" / "planted.log", OTHER_UID, OTHER_UID)
    out = cli(root, "verify")
    rel = lambda p: str(p.relative_to(root))  # noqa: E731
    assert f"rebuilt (has a kernel.so that does not match its recorded sha256 (damaged or replaced)): {rel(race)}" \
        in out
    assert f"removed (has a kernel.so that does not match its recorded sha256 (damaged or replaced)): {rel(runtime)}" \
        in out
    assert f": {rel(stored)}" in out and "content does not match its recorded sha256" in out
    assert f"removed (not a cache entry): {rel(stored.with_suffix('.pickle'))}" in out
    assert f"removed (not a cache entry): {rel(root / 'kernels' / 'zz')}" in out
    assert f"removed abandoned build folder: tmp/kernel-{'0' * 64}-abc123" in out
    assert f"removed (owned by uid {OTHER_UID}): failed/planted.log" in out
    assert "made private: failed" in out
    assert "0 failed" in out
    assert not (tmp_path / "ran").exists()
    assert entries.problem(race, "kernel", race.name) is None and not runtime.exists()
    assert "0 repairs" in cli(root, "verify")  # nothing left to repair
    result = result_of(run_child(script, root, FUSE="1"))
    assert result["ok"] and result["warned"] == []
    assert [e for e in result["events"] if e[0] == "compile"] == [["compile", "kfuse_runtime"]]


def test_verify_leaves_another_users_cache_alone(copy):
    root, _ = copy
    give_away(root)
    out = cli(root, "verify", expect=1)
    assert f"{root} is owned by uid {OTHER_UID}" in out and "not touched" in out
    assert all(p.lstat().st_uid == OTHER_UID for p in root.rglob("*"))


# --- the formats themselves -------------------------------------------------------------------------------------
def test_fused_entry_json_round_trips_and_rejects_tampering(copy):
    root, _ = copy
    [stored] = root.glob("fused/*/*.json")
    digest = stored.stem
    text = stored.read_text()
    generated, spec, arg_index, writes = fused_entries._decode(text, digest)
    assert fused_entries._decode(fused_entries._encode(digest, (generated, spec, arg_index, writes)), digest) == \
        (generated, spec, arg_index, writes)
    data = json.loads(text)
    unsigned = [lambda e: e["generated"].update(source=e["generated"]["source"] + " "),  # damage that parses
                lambda e: e["arg_index"].__setitem__(0, e["arg_index"][0] + 1)]
    signed = [lambda e: e["arg_index"].append(0), lambda e: e["spec"].update(op="exec"),  # well-formed hash,
              lambda e: e["spec"]["params"][0][1].update(dtype="complex"),  # impossible content
              lambda e: e["generated"].update(slot_format="Z"), lambda e: e["writes"].__setitem__(0, "yes"),
              lambda e: e.update(extra=1)]
    for tamper in unsigned + signed:
        bad = json.loads(json.dumps(data))
        tamper(bad["entry"])
        if tamper in signed:
            bad["sha256"] = fused_entries._sha256(bad["entry"])
        with pytest.raises(ValueError):
            fused_entries._decode(json.dumps(bad), digest)
    with pytest.raises(ValueError):
        fused_entries._decode(text, "0" * 64)  # another key's file

