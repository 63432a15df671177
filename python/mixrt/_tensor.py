"""Tensor creation (from lists, scalars, NumPy, DLPack), the factories,
grad modes, and the Tensor methods written in Python."""

import builtins
import functools
import numbers

from . import _mixrt
from ._mixrt import Tensor, dtype

_NUMPY_DTYPES = {
    "float32": dtype.float32,
    "float16": dtype.float16,
    "float64": dtype.float32,  # mixrt has no float64: float32, as stored.
    "int32": dtype.int32,
    "int64": dtype.int64,
    "bool": dtype.bool,
}
_TO_NUMPY = {
    dtype.float32: "float32",
    dtype.float16: "float16",
    dtype.int32: "int32",
    dtype.int64: "int64",
    dtype.bool: "bool",
}


def _shape_and_values(data):
    """Flattens nested sequences, checking they are rectangular."""
    if isinstance(data, (builtins.bool, numbers.Number)):
        return [], [data]
    if not isinstance(data, (list, tuple)):
        raise TypeError(
            f"tensor(): expected a number, a (nested) list or tuple of "
            f"numbers, or an array, got {type(data).__name__}")
    if len(data) == 0:
        return [0], []
    shapes, values = [], []
    for item in data:
        shape, vals = _shape_and_values(item)
        shapes.append(shape)
        values.extend(vals)
    for d, shape in enumerate(shapes[1:], 1):
        if shape != shapes[0]:
            raise ValueError(
                f"expected sequence of length {shapes[0][0] if shapes[0] else 0} "
                f"at dim 1 (got {shape[0] if shape else 0})")
    return [len(data)] + shapes[0], values


def _inferred_dtype(values):
    if values and all(isinstance(v, builtins.bool) for v in values):
        return dtype.bool
    if any(isinstance(v, builtins.float) for v in values):
        return dtype.float32
    if all(isinstance(v, numbers.Integral) for v in values):
        return dtype.int64
    return dtype.float32


def _check_dtype(d):
    if d is not None and not isinstance(d, dtype):
        raise TypeError(f"dtype must be a mixrt.dtype, got {type(d).__name__}")


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (torch.tensor)."""
    _check_dtype(dtype)
    if isinstance(data, Tensor):
        t = data.detach().clone()
        if dtype is not None:
            t = t.to(dtype)
    elif hasattr(data, "__array_interface__") or hasattr(data, "__array__"):
        t = _from_array(data, dtype)
    else:
        shape, values = _shape_and_values(data)
        stored = dtype or _inferred_dtype(values)
        t = _mixrt._from_values([builtins.float(v) for v in values], shape,
                                stored)
    if requires_grad:
        t.requires_grad = True
    return t


def _from_array(data, requested):
    import numpy as np
    arr = np.asarray(data)
    name = arr.dtype.name
    if name not in _NUMPY_DTYPES:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{name}: mixrt takes "
            f"float32/16/64, int32/64 and bool")
    stored = _NUMPY_DTYPES[name]
    arr = np.ascontiguousarray(arr, dtype=_TO_NUMPY[stored])
    t = _mixrt._from_bytes(arr.tobytes(), list(arr.shape), stored)
    if requested is not None and requested != stored:
        t = t.to(requested)
    return t


def from_numpy(array):
    """A tensor sharing `array`'s memory (torch.from_numpy)."""
    return from_dlpack(array)


def from_dlpack(x):
    """A tensor sharing the memory of any DLPack exporter: a NumPy array,
    a PyTorch CPU tensor, a mixrt tensor (no copy)."""
    if isinstance(x, Tensor):
        return x
    if type(x).__name__ == "PyCapsule":
        return _mixrt._from_dlpack_capsule(x)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(
            f"from_dlpack: {type(x).__name__} does not implement __dlpack__")
    if hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        if int(device_type) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise BufferError(
                f"from_dlpack: the array is on DLPack device type "
                f"{int(device_type)}; mixrt adopts host memory only (kDLCPU)")
    try:
        capsule = x.__dlpack__(max_version=(1, 0))
    except TypeError:  # An exporter of the unversioned protocol (NumPy < 2).
        capsule = x.__dlpack__()
    return _mixrt._from_dlpack_capsule(capsule)


def _sizes(size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, numbers.Integral) or isinstance(s, builtins.bool):
            raise TypeError(
                f"size must be a sequence of ints, got {type(s).__name__}")
    return [int(s) for s in size]


def _factory(make):
    @functools.wraps(make)
    def factory(*size, dtype=None, requires_grad=False):
        _check_dtype(dtype)
        t = make(_sizes(size), dtype or _mixrt.dtype.float32)
        if requires_grad:
            t.requires_grad = True
        return t
    return factory


zeros = _factory(_mixrt.zeros)
ones = _factory(_mixrt.ones)
rand = _factory(_mixrt.rand)
randn = _factory(_mixrt.randn)


def full(size, fill_value, dtype=None, requires_grad=False):
    _check_dtype(dtype)
    if dtype is None:
        dtype = (_mixrt.dtype.bool if isinstance(fill_value, builtins.bool)
                 else _mixrt.dtype.int64
                 if isinstance(fill_value, numbers.Integral)
                 else _mixrt.dtype.float32)
    t = _mixrt.full(_sizes((size,)), builtins.float(fill_value), dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    _check_dtype(dtype)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        integral = all(isinstance(v, numbers.Integral)
                       for v in (start, end, step))
        dtype = _mixrt.dtype.int64 if integral else _mixrt.dtype.float32
    t = _mixrt.arange(builtins.float(start), builtins.float(end),
                      builtins.float(step), dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def manual_seed(seed):
    _mixrt.manual_seed(int(seed))


class _GuardContext:
    """A core guard as a context manager and decorator (torch.no_grad):
    each `with` enters a new guard from _guard() and leaves it after."""

    _make = None

    def __init__(self):
        self._guards = []

    def _guard(self):
        return type(self)._make()

    def _clone(self):
        return type(self)()

    def __enter__(self):
        guard = self._guard()
        guard.__enter__()
        self._guards.append(guard)
        return self

    def __exit__(self, *exc):
        self._guards.pop().__exit__(None, None, None)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self._clone():
                return fn(*args, **kwargs)
        return wrapped


class no_grad(_GuardContext):  # noqa: N801 (torch's name)
    _make = staticmethod(_mixrt._NoGrad)


class enable_grad(_GuardContext):  # noqa: N801
    _make = staticmethod(_mixrt._EnableGrad)


class inference_mode(_GuardContext):  # noqa: N801
    _make = staticmethod(_mixrt._InferenceMode)


def is_grad_enabled():
    return _mixrt.is_grad_enabled()


# ---- Tensor methods written here (the rest are bound in C++) ----

def _numpy(self):
    if self.requires_grad:
        raise RuntimeError(
            "Can't call numpy() on Tensor that requires grad. "
            "Use tensor.detach().numpy() instead.")
    if self.dtype == dtype.bfloat16:
        raise TypeError("Got unsupported ScalarType BFloat16")
    import numpy as np
    if self.__dlpack_device__()[0] == 1:
        # Shares the memory, writable, as torch's does (NumPy < 2 imports
        # DLPack read-only, so through the array interface).
        return np.asarray(_HostView(self))
    data = _mixrt._to_bytes(self.contiguous())
    return np.frombuffer(data, dtype=_TO_NUMPY[self.dtype]).reshape(self.shape)


class _HostView:
    """A tensor's host memory as NumPy's array interface sees it; the array
    keeps this object, and so the tensor's memory, alive."""

    def __init__(self, t):
        _mixrt._mark_shared(t)  # NumPy may write it behind mixrt's back.
        self._tensor = t
        item = t.dtype.itemsize
        self.__array_interface__ = {
            "version": 3,
            "shape": tuple(t.shape),
            "typestr": _TYPESTR[t.dtype],
            "data": (t.data_ptr(), False),
            "strides": tuple(s * item for s in t.stride()),
        }


_TYPESTR = {
    dtype.float32: "<f4",
    dtype.float16: "<f2",
    dtype.int32: "<i4",
    dtype.int64: "<i8",
    dtype.bool: "|b1",
}


def _bool(self):
    if self.numel() != 1:
        raise RuntimeError(
            f"Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(self.item())


def _float(self):
    return builtins.float(self.item())


def _int(self):
    return builtins.int(self.item())


def _array(self, dtype=None, copy=None):
    return _numpy(self) if dtype is None else _numpy(self).astype(dtype)


def _half(self):
    return self.to(_mixrt.dtype.float16)


def _bfloat16(self):
    return self.to(_mixrt.dtype.bfloat16)


def _long(self):
    return self.to(_mixrt.dtype.int64)


def _int32(self):
    return self.to(_mixrt.dtype.int32)


Tensor.numpy = _numpy
Tensor.__bool__ = _bool
Tensor.__float__ = _float
Tensor.__int__ = _int
Tensor.__index__ = _int
Tensor.__array__ = _array
Tensor.half = _half
Tensor.bfloat16 = _bfloat16
Tensor.long = _long
Tensor.int = _int32
