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


for _name in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "silu"):
    setattr(Tensor, _name, getattr(_mixrt, _name))
Tensor.softmax = lambda self, dim: _mixrt.softmax(self, dim)
Tensor.log_softmax = lambda self, dim: _mixrt.log_softmax(self, dim)
Tensor.clamp = lambda self, min=None, max=None: _mixrt.clamp(
    self, float("-inf") if min is None else min,
    float("inf") if max is None else max)
Tensor.matmul = matmul
Tensor.pow = lambda self, exponent: self ** exponent
