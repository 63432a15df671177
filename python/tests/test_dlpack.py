"""Zero-copy DLPack exchange: the same address both ways, writes visible on
both sides, the versioned protocol with max_version and copy, read-only
and foreign-device arrays refused with a clear error."""

import numpy as np
import pytest

import mixrt


def test_numpy_array_in_without_copy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = mixrt.from_dlpack(a)
    assert t.data_ptr() == a.ctypes.data
    assert t.shape == (2, 3) and t.dtype == mixrt.float32
    a[1, 2] = 42.0
    assert t[1, 2].item() == 42.0  # The same memory.
    assert mixrt.from_numpy(a).data_ptr() == a.ctypes.data


def test_strided_numpy_view_in_without_copy():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    v = a[:, 1::2]  # Strides (5, 2) elements.
    t = mixrt.from_dlpack(v)
    assert t.data_ptr() == v.ctypes.data
    np.testing.assert_array_equal(t.numpy(), v)
    np.testing.assert_array_equal((t * 2).numpy(), v * 2)


def test_tensor_out_to_numpy_without_copy():
    t = mixrt.arange(6, dtype=mixrt.float32)
    a = np.from_dlpack(t)  # Read-only: NumPy < 2 marks imports so.
    assert a.ctypes.data == t.data_ptr()
    n = t.numpy()  # Shares memory, writable, as torch's .numpy() does.
    assert n.ctypes.data == t.data_ptr()
    n[0] = -1.0
    assert t[0].item() == -1.0 and a[0] == -1.0


def test_memory_outlives_the_exporter():
    a = np.arange(4, dtype=np.int64)
    t = mixrt.from_dlpack(a)
    del a  # The tensor holds the array's memory alive.
    assert t.tolist() == [0, 1, 2, 3]


def test_versioned_protocol():
    t = mixrt.ones(3)
    capsule = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    back = mixrt.from_dlpack(capsule)
    assert back.data_ptr() == t.data_ptr()
    legacy = t.__dlpack__()
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    copied = mixrt.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert copied.data_ptr() != t.data_ptr()
    assert copied.tolist() == [1.0, 1.0, 1.0]
    assert t.__dlpack_device__() == (1, 0)


def test_a_capsule_is_consumed_once():
    capsule = mixrt.ones(2).__dlpack__()
    mixrt.from_dlpack(capsule)
    with pytest.raises(TypeError, match="not consumed"):
        mixrt.from_dlpack(capsule)


def test_read_only_arrays_are_refused():
    a = np.ones(3, dtype=np.float32)
    a.setflags(write=False)
    with pytest.raises(BufferError):
        mixrt.from_dlpack(a)


class _ForeignDevice:
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, **kwargs):
        raise AssertionError("never asked: the device is checked first")


def test_foreign_device_arrays_are_refused():
    with pytest.raises(BufferError, match="host memory only"):
        mixrt.from_dlpack(_ForeignDevice())


def test_unsupported_dtypes_and_objects_are_refused():
    with pytest.raises(TypeError):
        mixrt.from_dlpack(np.ones(2, dtype=np.float64))
    with pytest.raises(TypeError):
        mixrt.from_dlpack([1, 2])


def test_exporting_a_tensor_that_requires_grad_is_refused():
    t = mixrt.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="require gradient"):
        t.__dlpack__()


def test_numpy_writes_are_seen_by_a_compiled_function():
    # Shared memory has no version a cache could trust: a compiled
    # function reading it as a constant computes again every call.
    w = np.ones((4, 4), dtype=np.float32)
    weight = mixrt.from_dlpack(w)

    @mixrt.compile
    def f(x):
        # weight * 2 reads a constant only: a launch the plan would keep
        # between calls while the weight's version stands.
        return x @ (weight * 2.0)

    x = mixrt.ones(2, 4)
    assert f(x).tolist() == [[8.0] * 4] * 2
    assert f(x).tolist() == [[8.0] * 4] * 2
    w[:] = 2.0
    assert f(x).tolist() == [[16.0] * 4] * 2


def test_numpy_writes_are_seen_by_autocast_cached_casts():
    # A weight's bf16 cast is cached while its version stands; memory NumPy
    # writes has no version that proves it unchanged, so it is cast again.
    w_np = np.ones((4, 4), dtype=np.float32)
    w = mixrt.from_dlpack(w_np)
    w.requires_grad = True  # A leaf f32 weight: what the cache keeps.
    x = mixrt.ones(2, 4)
    with mixrt.autocast("cpu", dtype=mixrt.bfloat16):
        assert (x @ w).to(mixrt.float32).tolist() == [[4.0] * 4] * 2
        w_np[:] = 2.0
        assert (x @ w).to(mixrt.float32).tolist() == [[8.0] * 4] * 2
