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
        if self.requires_grad and _mixrt.is_grad_enabled():
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an "
                "in-place operation." if self.is_leaf else
                "in-place operations on tensors that require grad are not "
                f"supported yet (write x = x {name} y)")
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
