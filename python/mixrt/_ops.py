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
