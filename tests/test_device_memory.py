"""GPU-resident data (kfuse/runtime/device.py) with PyKokkos semantics, run on a stand-in GPU (conftest
``stand_in_gpu``, the ``fake_gpu`` fixture: compiled kernels launch with device pointers into host buffers kfuse cannot see, and every copy
is counted): ``pk.fence()`` copies nothing back, a host read copies back the View read, memory the program
reaches without a barrier stays current, ``pk.deep_copy`` between device Views stays on the device. Results
are checked against NumPy, and random programs of kfuse.check against their eager run on the host."""
import numpy as np
import pytest

import kfuse as pk

N = 1000
BYTES = N * 8


@pk.workunit
def dm_scale(i, a: float, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = a * x[i]


@pk.workunit
def dm_add_one(i, y: pk.View1D[pk.double]):
    y[i] = y[i] + 1.0


@pk.workunit
def dm_sum(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


@pytest.fixture(params=["eager", "fused"])
def mode(request):
    if request.param == "fused":
        pk.enable_fusion()
    return request.param


def inputs():
    x = pk.View([N])
    x[:] = np.arange(N, dtype=np.float64)
    return x


def test_fence_waits_without_copying_views_back(fake_gpu, mode):
    x, y, z = inputs(), pk.View([N]), pk.View([N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    pk.parallel_for(N, dm_scale, a=3.0, x=x, y=z)
    pk.fence()
    assert fake_gpu.to_host == []  # results stay on the GPU
    assert fake_gpu.to_device == [BYTES] * 3  # each went over once (a kernel need not write every element)


def test_a_host_read_copies_back_only_the_view_read(fake_gpu, mode):
    x, y, z = inputs(), pk.View([N]), pk.View([N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    pk.parallel_for(N, dm_scale, a=3.0, x=x, y=z)
    pk.fence()
    np.testing.assert_array_equal(np.asarray(y), 2.0 * np.arange(N))
    assert fake_gpu.to_host == [BYTES]  # y alone, not z
    assert y[5] == 10.0 and fake_gpu.to_host == [BYTES]  # current on the host now: no second copy
    np.testing.assert_array_equal(z.copy(), 3.0 * np.arange(N))
    assert fake_gpu.to_host == [BYTES, BYTES]


def test_a_reduction_needs_no_copy_back(fake_gpu, mode):
    x = inputs()
    assert float(pk.parallel_reduce(N, dm_sum, x=x)) == np.arange(N).sum()
    assert fake_gpu.to_host == []


def test_an_escaped_alias_is_current_after_every_launch(fake_gpu, mode):
    """The program's NumPy alias of a View has no barrier: the launches keep it current, in and out."""
    y = pk.View([N])
    alias = np.asarray(y)  # escaped while the program holds it
    pk.parallel_for(N, dm_add_one, y=y)
    np.testing.assert_array_equal(alias, np.ones(N))  # no fence, no View access in between
    alias[:10] = 100.0  # written behind kfuse's back: the next launch must see it
    pk.parallel_for(N, dm_add_one, y=y)
    expected = np.full(N, 2.0)
    expected[:10] = 101.0
    np.testing.assert_array_equal(alias, expected)
    pk.fence()
    np.testing.assert_array_equal(np.asarray(y), expected)


def test_a_user_array_the_program_keeps_is_current(fake_gpu, mode):
    base = np.zeros(N)
    y = pk.array(base)  # escaped: the program still holds `base`
    pk.parallel_for(N, dm_add_one, y=y)
    np.testing.assert_array_equal(base, np.ones(N))
    base[:] = 5.0
    pk.parallel_for(N, dm_add_one, y=y)
    np.testing.assert_array_equal(base, np.full(N, 6.0))


def test_a_resized_view_launches_with_its_new_memory(fake_gpu, mode):
    """A View keeps the device copy it found (runtime/device.py ``_mirror_for``); ``resize`` gives it new memory,
    which its next launch must use: the kernel reads the new elements and its result reaches the host."""
    x, y = inputs(), pk.View([N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    np.testing.assert_array_equal(np.asarray(y), 2.0 * np.arange(N))
    old_x, old_y = x[0:N], y[0:N]  # the old memory lives on (and so does its device copy)
    x.resize(0, 2 * N)  # the old elements kept, the new ones zero
    x[N:] = 7.0
    y.resize(0, 2 * N)
    pk.parallel_for(2 * N, dm_scale, a=3.0, x=x, y=y)
    want = 3.0 * np.concatenate([np.arange(N), np.full(N, 7.0)])
    np.testing.assert_array_equal(np.asarray(y), want)
    np.testing.assert_array_equal(np.asarray(old_y), 2.0 * np.arange(N))
    np.testing.assert_array_equal(np.asarray(old_x), np.arange(N))


def test_deep_copy_between_device_views_stays_on_the_device(fake_gpu, mode):
    x, y, z = inputs(), pk.View([N]), pk.View([N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    pk.parallel_for(N, dm_scale, a=0.0, x=x, y=z)  # z has a device copy
    pk.deep_copy(z, y)
    assert fake_gpu.on_device == [BYTES] and fake_gpu.to_host == []
    pk.parallel_for(N, dm_add_one, y=z)  # the copy is what the next kernel reads
    np.testing.assert_array_equal(np.asarray(z), 2.0 * np.arange(N) + 1.0)
    np.testing.assert_array_equal(np.asarray(y), 2.0 * np.arange(N))
    assert fake_gpu.to_device == [BYTES] * 3  # x, y, z once each, before their first kernels


def test_deep_copy_into_part_of_a_device_view(fake_gpu, mode):
    """A destination that is part of its memory keeps the rest: the rest reaches the device before the copy."""
    x, whole = inputs(), pk.View([2 * N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=whole[N:])  # a device copy; its first half still zero
    whole[:N] = 7.0  # a host write: the host side of `whole` is newer now
    pk.deep_copy(whole[N:], x)  # x has a current device copy, so this stays on the device
    expected = np.concatenate([np.full(N, 7.0), np.arange(N, dtype=np.float64)])
    np.testing.assert_array_equal(np.asarray(whole), expected)


def test_deep_copy_to_or_from_the_host_goes_through_the_host(fake_gpu, mode):
    x, y = inputs(), pk.View([N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    host = pk.View([N])  # never used on the device: the copy lands there through the host
    pk.deep_copy(host, y)
    assert fake_gpu.on_device == [] and fake_gpu.to_host == [BYTES]
    np.testing.assert_array_equal(np.asarray(host), 2.0 * np.arange(N))
    pk.deep_copy(y, np.full(N, 4.0))  # overwrites all of y: its device contents are not fetched first
    assert fake_gpu.to_host == [BYTES]
    pk.parallel_for(N, dm_add_one, y=y)
    np.testing.assert_array_equal(np.asarray(y), np.full(N, 5.0))


def test_deep_copy_converts_dtype_through_the_host(fake_gpu, mode):
    x, y = inputs(), pk.View([N])
    pk.parallel_for(N, dm_scale, a=0.5, x=x, y=y)
    ints = pk.View([N], pk.int64)
    pk.deep_copy(ints, y)
    assert fake_gpu.on_device == []
    np.testing.assert_array_equal(np.asarray(ints), (0.5 * np.arange(N)).astype(np.int64))


def test_create_mirror_copies_the_device_data(fake_gpu, mode):
    x, y = inputs(), pk.View([N])
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    mirror = pk.create_mirror(y, copy=True)
    np.testing.assert_array_equal(np.asarray(mirror), 2.0 * np.arange(N))
    assert pk.create_mirror_view(y) is y


# --- new Views: zeros set on the device, not copied over ------------------------------------------------------
def on_gpu(view, writes=False):
    """What a GPU launch does with ``view`` (device.device_pointer), without a kernel."""
    from kfuse.runtime import device

    return device.device_pointer(view, writes)


def test_a_new_view_is_zeroed_on_the_device_not_copied(fake_cuda):
    pk.set_default_space(pk.Cuda)  # Views made now are for the GPU
    y = pk.View([N])
    on_gpu(y, writes=False)  # a kernel reading it sees zeros set there
    assert fake_cuda.zeroed == [BYTES] and fake_cuda.to_device == []
    np.testing.assert_array_equal(np.asarray(y), np.zeros(N))


def test_a_new_view_the_host_wrote_is_copied(fake_cuda):
    pk.set_default_space(pk.Cuda)
    y, z = pk.View([N]), pk.View([2, N])
    y[3] = 1.0  # a host write through the View
    z[1, :] = 2.0  # through a subview of its memory
    on_gpu(y), on_gpu(z)
    assert fake_cuda.zeroed == [] and fake_cuda.to_device == [BYTES, 2 * BYTES]


def test_a_new_view_a_host_kernel_used_is_copied(fake_cuda, mode):
    pk.set_default_space(pk.Cuda)
    x, y = pk.View([N]), pk.View([N])
    pk.parallel_for(pk.RangePolicy(pk.OpenMP, 0, N), dm_add_one, y=y)  # on the host: not zeros any more
    pk.fence()  # (a GPU launch would be ordered after it; on_gpu is not a launch)
    on_gpu(y), on_gpu(x)
    assert fake_cuda.to_device == [BYTES] and fake_cuda.zeroed == [BYTES]  # y copied, x zeroed
    np.testing.assert_array_equal(np.asarray(y), np.ones(N))


def test_a_host_kernel_sees_what_a_gpu_kernel_wrote_and_the_gpu_sees_its_writes(fake_cuda, mode):
    y = pk.View([N])
    on_gpu(y, writes=True)  # a GPU kernel wrote y: the device copy is newer
    (buffer,) = fake_cuda.buffers.values()
    buffer.view(np.float64)[:] = 5.0  # what it wrote
    pk.parallel_for(pk.RangePolicy(pk.OpenMP, 0, N), dm_add_one, y=y)  # a host kernel: a host access
    pk.fence()
    assert fake_cuda.to_host == [BYTES]
    on_gpu(y)  # the host kernel's result goes over before the next GPU kernel
    assert fake_cuda.to_device == [BYTES, BYTES]  # at y's first GPU use, and now
    np.testing.assert_array_equal(buffer.view(np.float64), np.full(N, 6.0))
    np.testing.assert_array_equal(np.asarray(y), np.full(N, 6.0))


def test_a_dropped_view_leaves_no_mark():
    from kfuse import views

    pk.set_default_space(pk.Cuda)
    before = len(views.constant)
    y = pk.View([N])
    assert len(views.constant) == before + 1
    del y
    assert len(views.constant) == before


@pytest.mark.parametrize("make, dtype, value", [
    (lambda: pk.full(N, 2.5), np.float64, 2.5),
    (lambda: pk.ones(N, pk.int32), np.int32, 1),
    (lambda: pk.full((4, N // 4), -3, dtype=np.int64), np.int64, -3),
    (lambda: pk.full(N, True), np.bool_, True),
    (lambda: pk.full_like(np.zeros(N, np.float32), 0.1), np.float32, np.float32(0.1)),
])
def test_a_new_constant_array_is_filled_on_the_device_not_copied(fake_cuda, make, dtype, value):
    pk.set_default_space(pk.Cuda)
    y = make()
    on_gpu(y)
    (buffer,) = fake_cuda.buffers.values()
    np.testing.assert_array_equal(buffer.view(dtype), np.full(y.size, value, dtype))  # what the GPU's copy holds
    assert fake_cuda.filled == [y.size * np.dtype(dtype).itemsize] and fake_cuda.to_device == []
    np.testing.assert_array_equal(np.asarray(y), np.full(y.shape, value, dtype))


def test_zeros_and_empty_arrays_for_the_gpu_are_not_copied(fake_cuda):
    pk.set_default_space(pk.Cuda)
    z, e = pk.zeros(N), pk.empty(N)
    on_gpu(z), on_gpu(e, writes=True)
    assert fake_cuda.zeroed == [BYTES] and fake_cuda.to_device == [] and fake_cuda.filled == []


def test_a_constant_array_the_host_changed_is_copied(fake_cuda):
    pk.set_default_space(pk.Cuda)
    y, empty = pk.full(N, 4.0), pk.zeros(0)
    y[7] = 0.0
    on_gpu(y), on_gpu(empty)
    assert fake_cuda.filled == [] and fake_cuda.to_device == [BYTES, 1]  # (a mirror is at least a byte)
    np.testing.assert_array_equal(fake_cuda.buffers[on_gpu(y)].view(np.float64), np.where(np.arange(N) == 7, 0.0, 4.0))


def test_views_made_for_the_host_are_copied(fake_cuda):
    y, z = pk.View([N]), pk.full(N, 3.0)  # default space OpenMP: nothing is assumed of their memory
    on_gpu(y), on_gpu(z)
    assert fake_cuda.zeroed == [] and fake_cuda.filled == [] and fake_cuda.to_device == [BYTES, BYTES]


# --- random programs: on the stand-in GPU, eager and fused, what the host sees equals eager on the host ---------
@pytest.mark.parametrize("index", range(16))
def test_random_programs_on_the_stand_in_gpu_agree_with_eager_on_the_host(fake_cuda, index):
    """kfuse.check's programs (escaped aliases, pk.array bases, NumPy arguments, subviews, reallocation, failing
    calls, threads, Debug-space kernels beside compiled ones) see on the stand-in GPU what eager sees on the host."""
    from conftest import stand_in_gpu

    from kfuse.check import EAGER, FUSED, case_for, compare, run

    case = case_for(1717, index)
    expected = run(case, EAGER)
    with stand_in_gpu():
        mismatches = compare(expected, run(case, EAGER)) + compare(expected, run(case, FUSED))
    assert not mismatches, "\n".join(mismatches)


# --- the API itself, on the host ----------------------------------------------------------------------------
def test_create_mirror_is_new_memory_of_the_same_shape_dtype_and_layout():
    v = pk.View([3, 4], pk.int32, layout=pk.LayoutLeft)
    v[:] = np.arange(12).reshape(3, 4)
    empty, copied = pk.create_mirror(v), pk.create_mirror(v, copy=True)
    for m in (empty, copied):
        assert m is not v and m.shape == v.shape and m.dtype == v.dtype and m.layout is pk.LayoutLeft
    np.testing.assert_array_equal(np.asarray(empty), np.zeros((3, 4)))  # Kokkos value-initialises it
    np.testing.assert_array_equal(np.asarray(copied), np.arange(12).reshape(3, 4))
    copied[0, 0] = 99  # independent memory
    assert v[0, 0] == 0


def test_create_mirror_view_is_the_view_itself():
    v = pk.View([5])
    assert pk.create_mirror_view(v) is v and pk.create_mirror_view(v, copy=True) is v


def test_mirror_errors_name_the_function():
    with pytest.raises(TypeError, match="pk.create_mirror expects a pk.View"):
        pk.create_mirror(np.zeros(3))
    with pytest.raises(TypeError, match="pk.create_mirror_view expects a pk.View"):
        pk.create_mirror_view([1.0])


def test_stats_count_the_copies_between_host_and_device(fake_gpu, mode):
    x, y = inputs(), pk.View([N])
    pk.reset_stats()
    pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
    np.testing.assert_array_equal(y.copy(), 2.0 * np.arange(N))
    stats = pk.stats()
    assert (stats["copies_to_device"], stats["bytes_to_device"]) == (len(fake_gpu.to_device), sum(fake_gpu.to_device))
    assert (stats["copies_to_host"], stats["bytes_to_host"]) == (1, BYTES) == (len(fake_gpu.to_host),
                                                                              sum(fake_gpu.to_host))


def test_array_code_on_a_view_leaves_its_data_on_the_device(fake_gpu, mode):
    """GaussianNB's predict as array code (examples/gaussian_nb_array.py) run twice on one View: the samples go to
    the device once, every result is made there, and only the labels read come back."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from examples import gaussian_nb, gaussian_nb_array

    X, y = gaussian_nb.make_data(600, 8, 3, seed=2)
    model = gaussian_nb_array.GaussianNB().fit(X[:400], y[:400])
    test = pk.array(X[400:].copy())
    want = gaussian_nb_array.numpy_fit_predict(X[:400], y[:400], X[400:])["predicted"]
    for run in range(2):
        fake_gpu.to_device.clear(), fake_gpu.to_host.clear()
        labels = model.predict(test)
        np.testing.assert_array_equal(labels, want)
        assert fake_gpu.to_host == [200 * 8]  # the argmax indices (int64), nothing else
        assert (test._array.nbytes in fake_gpu.to_device) == (run == 0)


def test_a_captured_prediction_replays_on_the_device_with_no_copies(fake_gpu):
    """``pk.capture`` of GaussianNB's prediction (examples/gaussian_nb_array.py's ``most_likely``) on one View of
    samples: a replay's new memory is first written on the device, so replays copy nothing either way until the
    labels are read, and then only the labels come back."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from examples import gaussian_nb, gaussian_nb_array

    X, y = gaussian_nb.make_data(600, 8, 3, seed=2)
    model = gaussian_nb_array.GaussianNB().fit(X[:400], y[:400])
    test = pk.array(X[400:].copy())
    want = gaussian_nb_array.numpy_fit_predict(X[:400], y[:400], X[400:])["predicted"]
    predict = pk.capture(gaussian_nb_array.most_likely)
    pk.enable_fusion()
    try:
        for _ in range(3):  # recorded, then kept
            predict(test, model.theta_, model.var_, model.class_prior_)
        before = pk.stats()["calls_captured"]
        fake_gpu.to_device.clear(), fake_gpu.to_host.clear()
        kept = [predict(test, model.theta_, model.var_, model.class_prior_) for _ in range(4)]
        pk.fence()
        assert pk.stats()["calls_captured"] > before
        assert fake_gpu.to_device == [] and fake_gpu.to_host == []
        for index in kept:
            np.testing.assert_array_equal(model.classes_[np.asarray(index)], want)
        assert fake_gpu.to_host == [200 * 8] * len(kept)  # each prediction's labels (int64), nothing else
    finally:
        pk.disable_fusion()


def test_device_buffers_of_dropped_views_are_reused_not_freed(fake_gpu, mode, monkeypatch):
    """A step that makes its arrays anew allocates device memory the first time only; a reused buffer's old
    contents never show (the new View's values are copied over, or its kernel writes it first)."""
    import gc

    from kfuse.runtime import device

    calls = {"malloc": 0, "free": 0}
    malloc, free = fake_gpu.kfuse_device_malloc, fake_gpu.kfuse_device_free
    monkeypatch.setattr(fake_gpu, "kfuse_device_malloc", lambda n: calls.__setitem__("malloc", calls["malloc"] + 1)
                        or malloc(n))
    monkeypatch.setattr(fake_gpu, "kfuse_device_free", lambda p: calls.__setitem__("free", calls["free"] + 1)
                        or free(p))
    for step in range(4):
        x, y = inputs(), pk.View([N])
        x[:] = np.arange(N) + step
        pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
        np.testing.assert_array_equal(y.copy(), 2.0 * (np.arange(N) + step))
        del x, y
        gc.collect()
        if step == 0:
            made = calls["malloc"]
    assert made == 2 and calls == {"malloc": 2, "free": 0}
    monkeypatch.setenv("KFUSE_DEVICE_POOL_BYTES", "0")
    device._free_spares()
    x = inputs()
    pk.parallel_for(N, dm_add_one, y=x)
    np.testing.assert_array_equal(x.copy(), np.arange(N) + 1.0)
    del x
    gc.collect()
    assert calls == {"malloc": 3, "free": 3}  # two spares freed, then the new buffer at once


@pytest.fixture
def packs(monkeypatch) -> list:
    """One entry per time a kept GPU launch packs its argument buffer anew (runtime/launch.py ``KeptDeviceBuffer``)."""
    from kfuse.runtime import launch

    packs: list = []
    real = launch.KeptDeviceBuffer.pack
    monkeypatch.setattr(launch.KeptDeviceBuffer, "pack", lambda self, *a: packs.append(1) or real(self, *a))
    return packs


def test_a_replay_patches_only_its_new_result_pointers_into_the_kept_device_buffers(fake_gpu, packs):
    """A captured function whose result is new memory at every call: each replay's kept launches keep their device
    argument buffers and take just the new Views' device addresses into their pointer slots (runtime/launch.py
    ``KeptDeviceBuffer.move``), so once settled nothing packs; every call's result is memory of its own, and each
    follows NumPy, also after a host write makes an input's device copy stale (which packs again)."""

    @pk.capture
    def step(x, y):
        z = pk.empty((N,))
        pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
        pk.parallel_for(N, dm_scale, a=3.0, x=y, y=z)
        return z

    x, y = inputs(), pk.View([N])
    values = np.arange(N, dtype=np.float64)
    results, seen = [], {}
    pk.enable_fusion()
    try:
        for k in range(16):
            if k == 11:
                x[5] = -7.0  # on the host: x's device copy is stale now
                values[5] = -7.0
            results.append((step(x, y), 6.0 * values))
            seen[k] = len(packs)
        assert seen[8] == seen[10] and seen[15] == seen[10] + 1  # then only the launch reading x, after the write
    finally:
        pk.disable_fusion()
    assert len({r.ptr for r, _ in results}) == len(results)
    for got, want in results:
        np.testing.assert_array_equal(np.asarray(got), want)
    assert pk.stats()["calls_captured"] > 0


def test_a_replay_reuses_its_device_argument_buffer_until_a_view_changes_on_the_host(fake_gpu, packs):
    """A captured function's kept launches on a GPU keep their packed device pointers (runtime/launch.py
    ``KeptDeviceBuffer``) while their Views' device copies stay current; a host write to an argument makes its
    copy stale, and the next replay packs again, copying the new values over first: results follow NumPy."""

    @pk.capture
    def step(x, y, z):
        pk.parallel_for(N, dm_scale, a=2.0, x=x, y=y)
        pk.parallel_for(N, dm_scale, a=3.0, x=y, y=z)

    x, y, z = inputs(), pk.View([N]), pk.View([N])
    values = np.arange(N, dtype=np.float64)
    pk.enable_fusion()
    try:
        for k in range(12):
            if k % 4 == 3:
                x[k] = -1.0 - k  # on the host: x's device copy is stale now
                values[k] = -1.0 - k
            step(x, y, z)
            np.testing.assert_array_equal(np.asarray(z), 6.0 * values)
    finally:
        pk.disable_fusion()
    assert 0 < len(packs) < 12  # replays after an unchanged one packed nothing
    assert pk.stats()["calls_captured"] > 0


def test_a_kept_device_buffer_still_marks_what_it_writes_device_newer_while_nothing_went_stale(fake_gpu, packs):
    """A kept launch that knows nothing made a device copy stale since it last checked (``device.epoch``) skips the
    per-View check, but its written Views' device copies are still the newer ones: each host read after a replay
    copies them back, so results that change at every replay (with no host write between) follow NumPy; a host
    write in between, or memory the program reaches directly, is seen at the next launch."""

    @pk.capture
    def step(x, y, z):
        pk.parallel_for(N, dm_add_one, y=y)
        pk.parallel_for(N, dm_scale, a=2.0, x=y, y=z)

    x, y, z = inputs(), pk.View([N]), pk.View([N])
    want_y = np.zeros(N)
    pk.enable_fusion()
    try:
        for k in range(12):
            if k == 7:
                y[3] = 100.0  # a host write: y's device copy is stale now
                want_y[3] = 100.0
            step(x, y, z)
            want_y += 1.0
            np.testing.assert_array_equal(y.copy(), want_y)  # read on the host: y's copies agree again
            np.testing.assert_array_equal(z.copy(), 2.0 * want_y)
        alias = np.asarray(y)  # memory the program now reaches without a barrier
        for k in range(3):
            alias[k] = -5.0 - k
            want_y[k] = -5.0 - k
            step(x, y, z)
            want_y += 1.0
            np.testing.assert_array_equal(alias, want_y)
            np.testing.assert_array_equal(z.copy(), 2.0 * want_y)
    finally:
        pk.disable_fusion()
    assert 0 < len(packs) < 12  # the replays between host writes packed nothing
    assert pk.stats()["calls_captured"] > 0
