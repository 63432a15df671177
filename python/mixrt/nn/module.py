"""mixrt.nn.Module: torch.nn.Module's registration by attribute assignment
(parameters, buffers, submodules), traversal, state_dict, train/eval.
Subclasses write forward() in Python; every op it calls runs in the core."""

from collections import OrderedDict

from .._mixrt import Tensor
from .. import _mixrt
from .._tensor import no_grad


# Counts every change to any Module's attributes, registrations and
# training flags: mixrt.compile's guards re-read module state only when it
# moved (mixrt/_compile.py).
_epoch = [0]


def _changed():
    _epoch[0] += 1


def epoch():
    return _epoch[0]


def epoch_holder():
    """The list holding the change count (read by compiled calls' C++
    guards)."""
    return _epoch


def Parameter(data=None, requires_grad=True):  # noqa: N802 (torch's name)
    """A tensor a Module registers as a parameter when assigned to one of
    its attributes (torch.nn.Parameter): `data` detached, requiring grad."""
    if data is None:
        data = _mixrt.zeros([0], _mixrt.dtype.float32)
    if not isinstance(data, Tensor):
        raise TypeError(
            f"Parameter: expected a Tensor, got {type(data).__name__}")
    p = data.detach()
    p.requires_grad = requires_grad
    p._is_parameter = True
    return p


def _is_parameter(value):
    return isinstance(value, Tensor) and getattr(value, "_is_parameter", False)


class Module:
    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())

    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                "cannot assign module attributes before Module.__init__() "
                "call")

    def __setattr__(self, name, value):
        _changed()
        if _is_parameter(value):
            self._check_init()
            self._remove(name)
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._check_init()
            self._remove(name)
            self._modules[name] = value
        elif "_parameters" in self.__dict__ and name in self._parameters:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter "
                    f"'{name}' (mixrt.nn.Parameter or None expected)")
            self._parameters[name] = None
        elif "_buffers" in self.__dict__ and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer "
                    f"'{name}' (mixrt.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove(self, name):
        _changed()
        for d in (self.__dict__, self._parameters, self._buffers,
                  self._modules):
            d.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(
            f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        _changed()
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        self._check_init()
        if param is not None and not _is_parameter(param):
            param = Parameter(param)
        self._remove(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_init()
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer "
                f"'{name}' (mixrt.Tensor or None required)")
        self._remove(name)
        self._buffers[name] = tensor

    def register_module(self, name, module):
        self._check_init()
        self._remove(name)
        self._modules[name] = module

    add_module = register_module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required '
            f'"forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- traversal ----
    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo,
                                       f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named(self, table, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [
            (prefix, self)]
        for mod_prefix, m in mods:
            for name, t in getattr(m, table).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), t

    def named_parameters(self, prefix="", recurse=True):
        yield from self._named("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state ----
    def state_dict(self):
        state = OrderedDict()
        for prefix, m in self.named_modules():
            for table in ("_parameters", "_buffers"):
                for name, t in getattr(m, table).items():
                    if t is not None:
                        key = f"{prefix}.{name}" if prefix else name
                        state[key] = t.detach()
        return state

    def load_state_dict(self, state_dict, strict=True):
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}: "
                f"missing keys {missing}, unexpected keys {unexpected}")
        with no_grad():
            for k, target in own.items():
                if k not in state_dict:
                    continue
                src = state_dict[k]
                if tuple(src.shape) != tuple(target.shape):
                    raise RuntimeError(
                        f"size mismatch for {k}: copying a param with shape "
                        f"{tuple(src.shape)}, the shape in current model is "
                        f"{tuple(target.shape)}")
                target.copy_(src)
        return missing, unexpected

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        _changed()
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"
