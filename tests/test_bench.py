"""The benchmark driver and the demo, run as a user would (subprocesses): the bench's JSON carries every
field the reports promise, its PNG is a real image, and the demo validates its results and exits 0."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUP_FIELDS = ("name", "kernels", "unfused_ms", "fused_uo_ms", "fused_o_ms", "speedup_uo", "speedup_o")
SUBJECT_FIELDS = ("eager_s", "trace_s", "fused_uo_s", "fused_s", "trace_overhead_pct", "analysis_ms", "groups")


def _run(*args, timeout=600):
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_bench_smoke_writes_json_markdown_and_png(tmp_path):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = _run("-m", "kfuse.bench", "--smoke", "--subjects", "paper_fig2,mvt,nstream", "--json", str(out_json),
                "--plot", str(out_png))
    data = json.loads(out_json.read_text())
    assert set(data["subjects"]) == {"paper_fig2", "mvt", "nstream"} and not data["skipped"]
    for key in ("platform", "cpu_count", "kfuse_num_threads", "compiler", "kokkos_version"):
        assert data["machine"][key] not in (None, "")
    for name, res in data["subjects"].items():
        for key in SUBJECT_FIELDS:
            assert key in res, (name, key)
        assert res["eager_s"]["min"] <= res["eager_s"]["median"] <= res["eager_s"]["max"]
        assert res["groups"], f"{name}: the fuser formed no group"
        for g in res["groups"]:
            for key in GROUP_FIELDS:
                assert g[key] is not None and (not isinstance(g[key], float) or g[key] > 0), (name, g)
    # Every subject here fuses a known number of calls per group: add+mul, the two products, 5 iterations.
    assert [g["kernels"] for g in data["subjects"]["paper_fig2"]["groups"]] == [2]
    assert [g["kernels"] for g in data["subjects"]["mvt"]["groups"]] == [2]
    assert [g["kernels"] for g in data["subjects"]["nstream"]["groups"]] == [5]
    assert data["subjects"]["paper_fig2"]["validation"] == "PASS"
    assert data["subjects"]["mvt"]["validation"] == "PASS" and data["subjects"]["mvt"]["numpy_s"]["median"] > 0
    ablation = data["subjects"]["paper_fig2"]["groups"][0]["ablation"]
    assert list(ablation) == ["none", "args", "args+loops", "args+loops+restrict", "all"]
    compile_ = data["compile"]
    assert compile_["cold"]["compiles"] > 0 and compile_["warm"]["compiles"] == 0
    assert compile_["warm"]["cache_hits"] >= compile_["cold"]["compiles"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for heading in ("Fused groups", "End to end", "Transform ablation", "Compile vs cache load", "paper"):
        assert heading in proc.stdout
    assert "NS (50) 6.55/24.63" in proc.stdout  # the paper's Table 5 row, next to ours


def test_bench_skips_unknown_subject_with_reason(tmp_path):
    out_json = tmp_path / "bench.json"
    _run("-m", "kfuse.bench", "--smoke", "--subjects", "mvt,no_such_subject", "--compile-subject", "none",
         "--json", str(out_json))
    data = json.loads(out_json.read_text())
    assert list(data["subjects"]) == ["mvt"]
    assert "no_such_subject" in data["skipped"]["no_such_subject"]


def test_demo_validates_and_exits_zero():
    proc = _run("-m", "kfuse.demo")
    lines = [ln for ln in proc.stdout.splitlines() if ln.rstrip().endswith(("PASS", "FAIL"))]
    assert len(lines) == 3 and all(ln.rstrip().endswith("PASS") for ln in lines), proc.stdout
    assert "add + mul" in proc.stdout and "fused 2 calls" in proc.stdout
