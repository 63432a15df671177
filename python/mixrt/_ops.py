"""Top-level ops (mixrt.cat, mixrt.matmul, ...) and the Tensor methods that
are ops (x.relu(), x.softmax(dim), ...): each one core call."""

from . import _mixrt
from ._mixrt import Tensor


def cat(tensors, dim=0):
    return _mixrt.cat(list(tensors), dim)


def stack(tensors, dim=0):
    return _mixrt.stack(list(tensors), dim)


def matmul(a, b):
    return _mixrt.matmul(a, b)


def _method(op):
    # A bound C++ function is no descriptor: wrap it so x.relu() binds x.
    def method(self):
        return op(self)
    method.__name__ = op.__name__
    return method


for _name in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "silu"):
    setattr(Tensor, _name, _method(getattr(_mixrt, _name)))
def _softmax(self, dim):
    return _mixrt.softmax(self, dim)


def _log_softmax(self, dim):
    return _mixrt.log_softmax(self, dim)


def _clamp(self, min=None, max=None):
    return _mixrt.clamp(self, float("-inf") if min is None else min,
                        float("inf") if max is None else max)


def _pow(self, exponent):
    return self ** exponent


Tensor.softmax = _softmax
Tensor.log_softmax = _log_softmax
Tensor.clamp = _clamp
Tensor.matmul = matmul
Tensor.pow = _pow


def _in_place(name, binary):
    """x += y as PyTorch does it: x's own memory is written (a parameter
    updated in a loop changes in the model), x keeps its shape and dtype.
    Without these, Python would rebind the name to a new tensor and a hand
    written SGD step would silently update nothing."""
    def method(self, other):
        # Writability (a tensor that requires grad, under grad mode) is
        # copy_'s check, below; overlap of `other` with self is refused as
        # PyTorch refuses it (x += x.T), before anything is computed.
        _mixrt._check_in_place_overlap(self, other)
        result = binary(self, other)
        if result.shape != self.shape:
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the "
                f"broadcast shape {list(result.shape)}")
        if result.dtype.is_floating_point and \
                not self.dtype.is_floating_point:
            raise RuntimeError(
                f"result type {result.dtype.name} can't be cast to the "
                f"desired output type {self.dtype.name}")
        return self.copy_(result)
    method.__name__ = _IN_PLACE_NAMES[name]
    return method


# Module-level names the functions carry (type stubs import them by name).
_IN_PLACE_NAMES = {"+": "_iadd", "-": "_isub", "*": "_imul",
                   "/": "_itruediv"}


_iadd = _in_place("+", lambda a, b: a + b)
_isub = _in_place("-", lambda a, b: a - b)
_imul = _in_place("*", lambda a, b: a * b)
_itruediv = _in_place("/", lambda a, b: a / b)
Tensor.__iadd__ = _iadd
Tensor.__isub__ = _isub
Tensor.__imul__ = _imul
Tensor.__itruediv__ = _itruediv


# ---- Indexing with tensors (dim 0): x[long_tensor], x[bool_mask] ----

_core_getitem = Tensor.__getitem__


def _getitem(self, index):
    if isinstance(index, Tensor):
        return _take_rows(self, index)
    return _core_getitem(self, index)


def _take_rows(x, index):
    """x[index] along dim 0 through the core's embedding gather (so its
    backward is the gather's scatter-add); a bool mask picks its True rows
    (reading the mask on the host, as PyTorch's nonzero does)."""
    from ._tensor import tensor, zeros
    from .nn import functional as F
    if x.ndim == 0:
        raise IndexError("a 0-d tensor cannot be indexed by a tensor")
    if index.dtype == _mixrt.dtype.bool:
        lead = index.ndim
        if tuple(index.shape) != tuple(x.shape[:lead]):
            raise IndexError(
                f"the shape of the mask {list(index.shape)} does not match "
                f"the shape of the indexed tensor {list(x.shape)}")
        rows = [i for i, keep in enumerate(index.reshape(-1).tolist()) if keep]
        x = x.reshape([-1] + list(x.shape[lead:]))
        if not rows:
            return zeros(*([0] + list(x.shape[1:])), dtype=x.dtype)
        index = tensor(rows)
    if index.dtype not in (_mixrt.dtype.int64, _mixrt.dtype.int32):
        raise IndexError("tensors used as indices must be long, int or bool "
                         "tensors")
    if not x.dtype.is_floating_point:
        raise TypeError("indexing a tensor with a tensor needs a float "
                        "tensor (the core's gather is embedding's)")
    n = x.shape[0]
    rest = list(x.shape[1:])
    index = index.to(_mixrt.dtype.int64)
    index = index + (index < 0).to(_mixrt.dtype.int64) * n  # Negative: from the end.
    width = 1
    for s in rest:
        width *= s
    rows_out = F.embedding(index, x.reshape(n, width))
    return rows_out.reshape(list(index.shape) + rest)


Tensor.__getitem__ = _getitem
