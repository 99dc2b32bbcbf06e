"""kfuse as a package: the wheel's contents, finding and building Kokkos (``kfuse.kokkos``), and the progress line.

Nothing here builds Kokkos: builds are replaced by a stand-in that lays out a fake install, so the command lines,
source patches, registration and selection are checked in seconds. The real build is checked by hand (README).
"""
import io
import json
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from kfuse import progress
from kfuse.kokkos import __main__ as cli
from kfuse.kokkos import build, cuda_fixes, installs, provision, sources

REPO = Path(__file__).resolve().parent.parent

# The two calls as Kokkos 4.6 writes them in core/src/Cuda/Kokkos_Cuda_Instance.hpp, before CUDA 13.
OLD_INSTANCE = """\
  cudaError_t cuda_graph_add_dependencies_wrapper(
      cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
      size_t numDependencies) const {
    set_cuda_device();
    return cudaGraphAddDependencies(graph, from, to, numDependencies);
  }

  cudaError_t cuda_mem_prefetch_async_wrapper(const void* devPtr, size_t count,
                                              int dstDevice) const {
    set_cuda_device();
    return cudaMemPrefetchAsync(devPtr, count, dstDevice, m_stream);
  }
"""
WRAPPER = '#!/usr/bin/env bash\n# sm_70 is the default\ndefault_arch="sm_70"\n#default_arch="sm_80"\nnvcc "$@"\n'


def fake_install(root: Path, backends=("SERIAL", "OPENMP"), version=30401, manifest=None) -> Path:
    """The files kfuse reads from a Kokkos install prefix (``manifest``: register it as a per-user install)."""
    include = root / "include" / "kokkos"
    include.mkdir(parents=True)
    (include / "Kokkos_Core.hpp").write_text("// fake\n")
    (include / "KokkosCore_config.h").write_text(f"#define KOKKOS_VERSION {version}\n"
                                                  + "".join(f"#define KOKKOS_ENABLE_{b}\n" for b in backends))
    (root / "lib").mkdir()
    (root / "lib" / "libkokkoscore.so").write_bytes(b"")
    if manifest is not None:
        (root / installs.MANIFEST).write_text(json.dumps(manifest))
    return root


def fake_source(root: Path, version=("4", "6", "99")) -> Path:
    """A Kokkos source tree with the parts the CUDA build reads and patches."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc_wrapper").write_text(WRAPPER)
    (root / cuda_fixes.INSTANCE).parent.mkdir(parents=True)
    (root / cuda_fixes.INSTANCE).write_text(OLD_INSTANCE)
    (root / "CMakeLists.txt").write_text("".join(f"set(Kokkos_VERSION_{p} {v})\n"
                                                 for p, v in zip(("MAJOR", "MINOR", "PATCH"), version)))
    return root


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An empty world: no KFUSE_KOKKOS_ROOT, sys.prefix and the per-user folder under tmp_path, no GPU."""
    monkeypatch.delenv("KFUSE_KOKKOS_ROOT", raising=False)
    monkeypatch.delenv("KFUSE_DEFAULT_SPACE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(installs, "GPU_MARKERS", (tmp_path / "no-gpu",))
    installs.forget()
    yield tmp_path
    installs.forget()


def user_dir(name: str) -> Path:
    return installs.user_root() / name


# --- the package ---------------------------------------------------------------------------------------------
def test_the_wheel_carries_the_prelude_and_every_module(tmp_path):
    """Built from a copy of the tracked files, so the test leaves no build/ or egg-info in the repository."""
    tracked = subprocess.run(["git", "ls-files", "kfuse", "pyproject.toml", "README.md"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    src = tmp_path / "src"
    for name in tracked:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes((REPO / name).read_bytes())
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                           str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel, = (tmp_path / "dist").glob("kfuse-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "kfuse/codegen/kfuse_prelude.hpp" in names
    assert {n for n in tracked if n.startswith("kfuse/")} <= names
    metadata = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("METADATA"))
    assert {"Requires-Dist: numpy>=1.24", "Requires-Dist: cmake>=3.18", "Requires-Dist: ninja"} <= set(
        metadata.splitlines())


# --- finding Kokkos ----------------------------------------------------------------------------------------------
def test_kfuse_kokkos_root_comes_first(places, monkeypatch):
    fake_install(Path(sys.prefix))
    site = fake_install(places / "site")
    monkeypatch.setenv("KFUSE_KOKKOS_ROOT", str(site))
    chosen = installs.selected()
    assert (chosen.root, chosen.origin) == (str(site), "KFUSE_KOKKOS_ROOT")


def test_sys_prefix_comes_before_the_per_user_installs(places):
    fake_install(user_dir("3.4.01-openmp-serial"), manifest={"version": "3.4.01"})
    fake_install(Path(sys.prefix))
    assert installs.selected().origin == "sys.prefix"
    assert installs.selected().include_dir == str(Path(sys.prefix) / "include" / "kokkos")


def test_a_per_user_install_is_found_with_no_setting(places):
    fake_install(user_dir("3.4.01-openmp-serial"), manifest={"version": "3.4.01"})
    chosen = installs.selected()
    assert (chosen.root, chosen.origin, chosen.backends) == (str(user_dir("3.4.01-openmp-serial")), "per-user",
                                                             ("SERIAL", "OPENMP"))


def test_an_install_without_its_manifest_is_unfinished_and_ignored(places):
    fake_install(user_dir("3.4.01-openmp-serial"))
    with pytest.raises(installs.KokkosNotFound):
        installs.selected()


def test_a_cuda_install_is_chosen_for_the_cuda_space_or_when_a_gpu_is_present(places, monkeypatch):
    fake_install(Path(sys.prefix))
    cuda = fake_install(user_dir("4.6.99-cuda-openmp-serial"), ("SERIAL", "OPENMP", "CUDA"), 40699,
                        {"arch": "sm_90"})
    assert installs.selected().origin == "sys.prefix"  # no GPU: a CUDA Kokkos could not even initialise
    monkeypatch.setenv("KFUSE_DEFAULT_SPACE", "Cuda")
    assert (installs.selected().root, installs.selected().arch) == (str(cuda), "sm_90")
    monkeypatch.delenv("KFUSE_DEFAULT_SPACE")
    gpu = places / "gpus"
    (gpu / "0000:01:00.0").mkdir(parents=True)
    monkeypatch.setattr(installs, "GPU_MARKERS", (gpu,))
    installs.forget()
    assert installs.selected().root == str(cuda)


def test_nothing_found_names_the_command_that_builds_kokkos(places, monkeypatch):
    monkeypatch.setenv("KFUSE_KOKKOS_AUTO_INSTALL", "0")
    with pytest.raises(installs.KokkosNotFound) as err:
        provision.selected()
    assert "python -m kfuse.kokkos install" in str(err.value)
    assert sys.prefix in str(err.value) and str(installs.user_root()) in str(err.value)


def test_a_cuda_space_without_a_cuda_kokkos_names_the_cuda_command_and_builds_nothing(places, monkeypatch):
    fake_install(Path(sys.prefix))
    monkeypatch.setenv("KFUSE_DEFAULT_SPACE", "Cuda")
    monkeypatch.setattr(build, "install", lambda **kw: pytest.fail("built a Kokkos"))
    with pytest.raises(installs.KokkosNotFound, match=r"install --cuda --source"):
        provision.selected()


def test_a_bad_kfuse_kokkos_root_is_an_error_naming_it(places, monkeypatch):
    monkeypatch.setenv("KFUSE_KOKKOS_ROOT", str(places / "nowhere"))
    with pytest.raises(installs.KokkosNotFound, match=r"KFUSE_KOKKOS_ROOT=.*nowhere holds no Kokkos"):
        provision.selected()


def test_first_use_with_nothing_found_builds_the_host_kokkos_and_says_so(places, monkeypatch, capsys):
    calls = []

    def stand_in(say):
        calls.append(say)
        fake_install(user_dir("3.4.01-openmp-serial"), manifest={})

    monkeypatch.setattr(build, "install", stand_in)
    assert provision.selected().origin == "per-user"
    assert len(calls) == 1
    assert "building one now" in capsys.readouterr().err
    monkeypatch.setenv("KFUSE_QUIET", "1")
    provision.say("not shown")
    assert capsys.readouterr().err == ""


# --- building Kokkos: commands, sources, patches -------------------------------------------------------------------
def plan(tmp_path, **kw):
    return build.Plan(tmp_path / "src", tmp_path / "prefix", tmp_path / "b", "3.4.01", cmake="/x/cmake",
                      ninja="/x/ninja", jobs=2, **kw)


def test_the_host_build_forces_cuda_off_and_carries_the_known_good_options(tmp_path):
    cmd = plan(tmp_path).configure()
    assert cmd[:5] == ["/x/cmake", "-S", str(tmp_path / "src"), "-B", str(tmp_path / "b")]
    for option in ("-DKokkos_ENABLE_CUDA=OFF", "-DKokkos_ENABLE_OPENMP=ON", "-DKokkos_ENABLE_SERIAL=ON",
                   "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_CXX_STANDARD=17", "-DCMAKE_BUILD_TYPE=Release",
                   "-DCMAKE_CXX_FLAGS=-include cstdint -include limits", "-DCMAKE_POLICY_VERSION_MINIMUM=3.5",
                   f"-DCMAKE_INSTALL_PREFIX={tmp_path / 'prefix'}", "-DCMAKE_CXX_COMPILER=g++", "-G",
                   "-DCMAKE_MAKE_PROGRAM=/x/ninja"):
        assert option in cmd
    assert plan(tmp_path).build() == ["/x/cmake", "--build", str(tmp_path / "b"), "--parallel", "2"]
    assert plan(tmp_path).install() == ["/x/cmake", "--install", str(tmp_path / "b")]
    assert "-G" not in build.Plan(tmp_path, tmp_path, tmp_path, "3.4.01").configure()  # no ninja: make


def test_the_cuda_build_compiles_through_the_sources_nvcc_wrapper_for_one_arch(tmp_path):
    cmd = plan(tmp_path, cuda=True, arch="sm_90").configure()
    assert {"-DKokkos_ENABLE_CUDA=ON", "-DKokkos_ENABLE_OPENMP=ON", "-DKokkos_ARCH_HOPPER90=ON",
            f"-DCMAKE_CXX_COMPILER={tmp_path / 'src' / 'bin' / 'nvcc_wrapper'}"} <= set(cmd)
    assert not any("-include" in c or c == "-DKokkos_ENABLE_CUDA=OFF" for c in cmd)


def test_cuda_fixes_apply_once_and_keep_the_old_calls_for_older_cuda(tmp_path):
    src = fake_source(tmp_path / "k")
    assert set(cuda_fixes.apply(src).values()) == {"applied"}
    text = (src / cuda_fixes.INSTANCE).read_text()
    assert "    return cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies);" in text
    assert ("return cudaMemPrefetchAsync(devPtr, count, cudaMemLocation{cudaMemLocationTypeDevice, dstDevice}, 0, "
            "m_stream);") in text
    assert text.count("#if CUDART_VERSION >= 13000") == 2 and text.count("#endif") == 2
    assert "return cudaMemPrefetchAsync(devPtr, count, dstDevice, m_stream);" in text  # the #else branch
    assert set(cuda_fixes.apply(src).values()) == {"already present"}
    assert (src / cuda_fixes.INSTANCE).read_text() == text
    (src / cuda_fixes.INSTANCE).write_text("// a Kokkos without these calls\n")
    assert set(cuda_fixes.apply(src).values()) == {"not needed"}


def test_the_default_arch_is_set_in_nvcc_wrapper(tmp_path):
    src = fake_source(tmp_path / "k")
    cuda_fixes.set_default_arch(src, "sm_90")
    cuda_fixes.set_default_arch(src, "sm_90")
    assert (src / "bin" / "nvcc_wrapper").read_text() == WRAPPER.replace('default_arch="sm_70"',
                                                                          'default_arch="sm_90"')


def test_a_cuda_install_patches_a_copy_builds_registers_and_is_selected(places, monkeypatch):
    """The whole ``install --cuda`` path with the three CMake steps replaced by a stand-in."""
    user_src = fake_source(places / "kokkos-4.6.99")
    tarball = places / "kokkos-4.6.99.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(user_src, arcname="kokkos-4.6.99")
    plans = []

    def stand_in(plan, log, say):
        plans.append(plan)
        assert "nullptr" in (plan.source / cuda_fixes.INSTANCE).read_text()
        assert 'default_arch="sm_90"' in (plan.source / "bin" / "nvcc_wrapper").read_text()
        fake_install(plan.prefix, plan.backends, 40699)

    monkeypatch.setattr(build, "_run", stand_in)
    monkeypatch.setattr(build, "tools", lambda: ("/x/cmake", "/x/ninja"))
    said = []
    for source in (user_src, tarball):
        done = build.install(source, cuda=True, arch="sm_90", jobs=4, say=said.append, force=True)
        assert Path(done.root) == installs.user_root() / "4.6.99-cuda-openmp-serial"
        assert (done.arch, done.backends) == ("sm_90", ("SERIAL", "OPENMP", "CUDA"))
    assert (user_src / cuda_fixes.INSTANCE).read_text() == OLD_INSTANCE  # the user's source is left alone
    assert "-DKokkos_ARCH_HOPPER90=ON" in plans[0].configure() and plans[0].jobs == 4
    assert any("applied" in line for line in said)
    manifest = json.loads((Path(done.root) / installs.MANIFEST).read_text())
    assert (manifest["arch"], manifest["source"]) == ("sm_90", str(tarball))
    again = build.install(user_src, cuda=True, arch="sm_90", say=said.append)  # installed: nothing is built
    assert again.root == done.root and len(plans) == 2
    with pytest.raises(build.BuildError, match="built for sm_90, not sm_80: add --force"):
        build.install(user_src, cuda=True, arch="sm_80", say=said.append)
    monkeypatch.setenv("KFUSE_DEFAULT_SPACE", "Cuda")
    assert installs.selected().root == done.root


def test_cuda_needs_a_kokkos_4_source_and_a_known_arch(places):
    with pytest.raises(build.BuildError, match="--cuda --source"):
        build.install(cuda=True, arch="sm_90")
    with pytest.raises(build.BuildError, match="unknown GPU architecture 'sm_91'"):
        build.install(fake_source(places / "k"), cuda=True, arch="sm_91")
    with pytest.raises(build.BuildError, match="needs a Kokkos 4 source"):
        build.install(fake_source(places / "k3", ("3", "4", "01")), cuda=True, arch="sm_80")


def test_the_gpu_arch_comes_from_nvidia_smi():
    ok = lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, "9.0\n", "")  # noqa: E731
    assert build.detect_arch(ok) == "sm_90"
    missing = lambda cmd, **kw: (_ for _ in ()).throw(FileNotFoundError("nvidia-smi"))  # noqa: E731
    with pytest.raises(build.BuildError, match="pass --arch"):
        build.detect_arch(missing)


def test_sources_are_found_in_folders_tarballs_and_the_pykokkos_base_layout(tmp_path):
    kokkos = fake_source(tmp_path / "pkb" / "external" / "kokkos", ("3", "4", "01"))
    assert sources.from_path(tmp_path / "pkb", tmp_path / "w1") == kokkos
    assert sources.version(kokkos) == "3.4.01"
    with pytest.raises(sources.SourceError, match="no Kokkos source in"):
        sources.from_path(tmp_path / "pkb" / "external" / "kokkos" / "bin", tmp_path / "w2")
    fake = tmp_path / sources.BUNDLE_FILE
    fake.write_bytes(b"not the sdist")
    with pytest.raises(sources.SourceError, match="sha256 differs"):
        sources.from_path(fake, tmp_path / "w3")


def test_the_bundled_source_is_downloaded_with_pip_and_a_failure_says_what_to_do(tmp_path):
    cmd = sources.download_command(tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    assert {"--no-deps", "pykokkos-base==0.0.7"} <= set(cmd) and cmd[cmd.index("--no-binary") + 1] == "pykokkos-base"
    failed = lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "No matching distribution")  # noqa: E731
    with pytest.raises(sources.SourceError, match="No matching distribution(.|\n)*pass it with --source"):
        sources.bundled(tmp_path, failed)


def test_one_build_at_a_time(tmp_path):
    said, order = [], []
    with build._locked(tmp_path / ".x.lock", said.append):
        waiter = threading.Thread(target=lambda: build._locked(tmp_path / ".x.lock", said.append).__enter__()
                                  or order.append("second"))
        waiter.start()
        time.sleep(0.3)
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"] and "waiting for another process" in said[0]


# --- the command line --------------------------------------------------------------------------------------------
def test_cli_arguments():
    args = cli.parser().parse_args(["install", "--cuda", "--arch", "sm_90", "--source", "k.tar.gz", "--jobs", "3"])
    assert (args.cuda, args.arch, args.source, args.jobs, args.force, args.quiet) == (True, "sm_90", Path("k.tar.gz"),
                                                                                      3, False, False)
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["build"])
    assert cli.main(["install", "--arch", "sm_90"]) == 2


def test_cli_install_reports_errors_and_reuses_a_found_kokkos(places, capsys):
    assert cli.main(["install", "--cuda"]) == 1
    assert "error: a CUDA Kokkos is built from a Kokkos 4 source" in capsys.readouterr().err
    fake_install(Path(sys.prefix))
    assert cli.main(["install"]) == 0
    assert "nothing to build" in capsys.readouterr().out


def test_cli_status_lists_installs_and_the_selected_one(places, capsys):
    assert cli.main(["status"]) == 1
    assert "selected: none (no Kokkos found" in capsys.readouterr().out
    fake_install(Path(sys.prefix))
    fake_install(user_dir("4.6.99-cuda-openmp-serial"), ("SERIAL", "OPENMP", "CUDA"), 40699, {"arch": "sm_90"})
    installs.forget()
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "Kokkos 3.4.01 (Serial, OpenMP)" in out and "Kokkos 4.6.99 (Serial, OpenMP, Cuda, sm_90)" in out
    assert f"selected: {sys.prefix} (sys.prefix)" in out


# --- progress ---------------------------------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_a_task_on_a_terminal_and_erases_it(monkeypatch):
    monkeypatch.delenv("KFUSE_QUIET", raising=False)
    term = Terminal()
    board = progress.Board(term)
    batch = progress.Batch(8)
    with board.task(f"compiling kernel add ({batch.number()})"):
        time.sleep(2.5 * progress.TICK)
    assert "kfuse: compiling kernel add (1 of 8)  0." in term.getvalue()
    assert term.getvalue().endswith("\r\x1b[K")
    assert batch.number() == "2 of 8"


@pytest.mark.parametrize("stream, quiet", [(io.StringIO(), "0"), (Terminal(), "1")])
def test_progress_is_silent_off_a_terminal_or_when_quiet(monkeypatch, stream, quiet):
    monkeypatch.setenv("KFUSE_QUIET", quiet)
    with progress.Board(stream).task("compiling kernel add"):
        time.sleep(2 * progress.TICK)
    assert stream.getvalue() == ""


def test_cli_install_refuses_to_build_behind_a_bad_kfuse_kokkos_root(places, monkeypatch, capsys):
    monkeypatch.setenv("KFUSE_KOKKOS_ROOT", str(places / "nowhere"))
    assert cli.main(["install"]) == 1
    assert "unset it to build and use the per-user one" in capsys.readouterr().err


def test_a_per_user_folder_that_cannot_be_made_is_an_error_naming_xdg_data_home(places, monkeypatch):
    (places / "file").write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(places / "file"))
    with pytest.raises(build.BuildError, match="set XDG_DATA_HOME to a folder of yours"):
        build.install()
