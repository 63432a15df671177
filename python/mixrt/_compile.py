"""mixrt.compile: torch.compile for Python functions and modules.

The core captures the launches the function makes (below Python) and
replays them without calling Python again. What the core cannot see is the
Python the function read: a global or closure number, a module's training
flag or its attributes, which tensor an attribute holds. Those are guarded
here: each call compares them with what the trace saw, and a change traces
again (as Dynamo's guards do), so a replay never computes with a stale
Python value. Numbers passed as arguments are part of the key the same
way. After `_RECOMPILE_LIMIT` variants a function runs eagerly (PyTorch's
recompile limit), never wrongly.
"""

import functools
import types
from collections import OrderedDict

from . import _mixrt
from ._mixrt import Tensor
from .nn import module as _module_state
from .nn.module import Module

_RECOMPILE_LIMIT = 8
_MODES = ("default", "reduce-overhead", "max-autotune",
          "max-autotune-no-cudagraphs")
_SCALARS = (bool, int, float, str, bytes, type(None), complex)


def _frozen(value, depth=0):
    """A hashable picture of a value a replay depends on."""
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, Tensor):
        # Which tensor (its contents are the core's to guard).
        return ("tensor", id(value))
    if _is_ndarray(value):
        # Its contents: a NumPy array read inside the function is read by
        # value (float(arr[0])) and can change in place at any time.
        return ("ndarray", id(value), value.dtype.str, value.shape,
                value.tobytes())
    if isinstance(value, (tuple, list)) and depth < 3:
        return (type(value).__name__,
                tuple(_frozen(v, depth + 1) for v in value))
    if isinstance(value, dict) and depth < 3:
        return ("dict", tuple(sorted(
            ((repr(k), _frozen(v, depth + 1)) for k, v in value.items()))))
    return ("object", id(value))


def _is_ndarray(value):
    """A NumPy array, without importing NumPy."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ == "ndarray"


class _GuardCollector:
    """Collects what a function or module reads from Python: globals and
    closure cells its code names, its defaults, modules' flags and
    attributes, recursively through the functions and modules it reaches."""

    def __init__(self):
        self.items = []
        self.seen = set()
        # Every name the collected code uses (globals and attributes alike):
        # which attributes of an imported module it may read.
        self.names = set()
        # What a later call re-reads to know nothing moved, cheaper than
        # collecting again: (read, picture) pairs for the globals, closure
        # cells and defaults reached, and the module attributes assignment
        # cannot change unseen (containers, other objects); the modules'
        # own state is covered by nn.module's change count.
        self.probes = []
        # The cheapest probes: (kind, holder, key, object), a value that
        # must still be the very same object: a global ("item": holder a
        # dict), a closure cell's contents ("cell"), a function's defaults
        # ("attr"). The compiled call checks them in C++.
        self.same = []

    def collect(self, obj, depth=0):
        if id(obj) in self.seen or depth > 6:
            return
        self.seen.add(id(obj))
        if isinstance(obj, Module):
            self._module(obj, depth)
        elif isinstance(obj, types.MethodType):
            self.collect(obj.__self__, depth + 1)
            self.collect(obj.__func__, depth + 1)
        elif isinstance(obj, types.FunctionType):
            self._function(obj, depth)
        elif isinstance(obj, functools.partial):
            self.items.append(("partial", _frozen(obj.args),
                               _frozen(obj.keywords)))
            self.collect(obj.func, depth + 1)

    def _value(self, name, value, depth, holder, key, assigned_only=False):
        """The value is `holder[key]` (a dict's item), or `holder`'s contents
        when `key` is None (a closure cell); `assigned_only`: it can change
        only by assignment (a module's attribute), which the module change
        count sees."""
        read = _reader(holder, key)
        if isinstance(value, (Module, types.FunctionType, types.MethodType,
                              functools.partial)):
            self.items.append((name, "id", id(value)))
            if not assigned_only:
                self.same.append(_same(holder, key, value))
            self.collect(value, depth + 1)
        elif isinstance(value, (types.ModuleType, type,
                                types.BuiltinFunctionType)):
            self.items.append((name, "id", id(value)))
            if not assigned_only:
                self.same.append(_same(holder, key, value))
            if isinstance(value, types.ModuleType):
                self._module_attributes(name, value, depth)
        elif isinstance(value, _SCALARS + (Tensor,)) or _is_ndarray(value):
            picture = _frozen(value)
            self.items.append((name, picture))
            if not assigned_only:
                self.probes.append((_frozen_of(read), picture))
        elif isinstance(value, (tuple, list, dict)):
            picture = _frozen(value)
            self.items.append((name, picture))
            self.probes.append((_frozen_of(read), picture))
        else:
            # Another object: which one, and its plain attributes.
            picture = _object_picture(value)
            self.items.append((name, "object", picture))
            self.probes.append((_object_picture_of(read), picture))

    def _module_attributes(self, name, module, depth):
        """The attributes of an imported module (`import cfg`) the code
        being collected may read: the names its code uses that the module
        has (cfg.alpha names "alpha"), each guarded by value as a global
        is, so `cfg.alpha = 4.0` traces again. A name that is not such an
        attribute is only a guard too many."""
        d = getattr(module, "__dict__", {})
        for attr in sorted(self.names & d.keys()):
            if attr.startswith("__"):
                continue
            self._value(f"{name}.{attr}", d[attr], depth + 1, d, attr)

    def _function(self, fn, depth):
        code = fn.__code__
        names = set()
        stack = [code]
        while stack:  # Nested functions' names too (lambdas, comprehensions).
            c = stack.pop()
            names.update(c.co_names)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        self.names |= names
        g = fn.__globals__
        for name in sorted(names):
            if name in g:
                self._value(name, g[name], depth, g, name)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                self._value(name, cell.cell_contents, depth, cell, None)
            except ValueError:  # An empty cell.
                self.items.append((name, "empty"))
                self.probes.append((functools.partial(_cell_contents, cell),
                                    _MISSING))
        defaults = (_frozen(fn.__defaults__), _frozen(fn.__kwdefaults__))
        self.items.append(("defaults", defaults))
        if fn.__kwdefaults__ is None and all(
                isinstance(v, _SCALARS) for v in fn.__defaults__ or ()):
            # Immutable values in an immutable tuple: only assigning
            # __defaults__ or __kwdefaults__ changes them.
            self.same.append(("attr", fn, "__defaults__", fn.__defaults__))
            self.same.append(("attr", fn, "__kwdefaults__", None))
        else:
            self.probes.append((functools.partial(_defaults_of, fn),
                                defaults))

    def _module(self, m, depth):
        self.items.append(("module", id(m), type(m).__name__, m.training))
        d = m.__dict__
        for name, value in d.items():
            if name in ("_parameters", "_buffers", "_modules", "training"):
                continue
            self._value(name, value, depth, d, name, assigned_only=True)
        for table in ("_parameters", "_buffers"):
            for name, t in getattr(m, table).items():
                self.items.append((name, _frozen(t)))
        for name, child in m._modules.items():
            self.items.append((name, "id", id(child)))
            if child is not None:
                self.collect(child, depth + 1)
        forward = getattr(type(m), "forward", None)
        if isinstance(forward, types.FunctionType):
            self.collect(forward, depth + 1)


_MISSING = object()


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _defaults_of(fn):
    return (_frozen(fn.__defaults__), _frozen(fn.__kwdefaults__))


def _kind(key):
    """How `holder[key]` is read: a dict's item, or a closure cell's
    contents when `key` is None."""
    return "cell" if key is None else "item"


def _same(holder, key, value):
    """An identity guard on `holder[key]` (see _kind)."""
    return (_kind(key), holder, key, value)


def _read_same(kind, holder, key):
    if kind == "item":
        return holder.get(key, _MISSING)
    if kind == "cell":
        return _cell_contents(holder)
    return getattr(holder, key, _MISSING)


def _reader(holder, key):
    return functools.partial(_read_same, _kind(key), holder, key)


def _frozen_of(read):
    return lambda: _frozen(read())


def _object_picture(value):
    attrs = getattr(value, "__dict__", None)
    return (id(value), () if attrs is None else tuple(
        (k, _frozen(v)) for k, v in attrs.items()
        if isinstance(v, _SCALARS + (Tensor,))))


def _object_picture_of(read):
    return lambda: _object_picture(read())


def _guards(fn):
    """The full picture of what `fn` reads (the variant's key), and the
    probes that tell, more cheaply, that it has not moved."""
    c = _GuardCollector()
    c.collect(fn)
    return tuple(c.items), (c.same, c.probes)


class _Variant:
    def __init__(self):
        self.compiled = None
        self.traced = None  # The core holds it weakly: kept alive here.
        self.single = True


class CompiledFunction:
    """What mixrt.compile returns for a function: called like it."""

    def __init__(self, fn, mode, fullgraph, dynamic):
        self._fn = fn
        self._mode = mode
        self._fullgraph = fullgraph
        self._dynamic = dynamic
        self._variants = OrderedDict()
        self.eager_fallbacks = 0
        # The last call's variant, with what makes it valid again without
        # collecting the guards: the module change count, the argument
        # key, and the probes.
        self._last = None
        # The same check and call in C++ (_mixrt._GuardedCall), for calls
        # of Tensors and scalars; None when the last call had arguments of
        # other kinds (containers, objects).
        self._fast = None
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        fast = self._fast
        if fast is not None and not kwargs:
            out = fast(*args)
            if out is not None:
                return out
        if kwargs:
            raise TypeError("a compiled function takes positional arguments "
                            "only")
        positions = tuple(i for i, a in enumerate(args)
                          if isinstance(a, Tensor))
        others = tuple((i, _frozen(a)) for i, a in enumerate(args)
                       if not isinstance(a, Tensor))
        variant = self._last_valid(positions, others)
        if variant is None:
            self._fast = None
            variant = self._variant(args, positions, others)
            if variant is None:  # Past the recompile limit: eager.
                return self._fn(*args)
        out = variant.compiled([args[i] for i in positions])
        if self._fast is None and all(isinstance(args[i], _SCALARS)
                                      for i, _ in others):
            epoch, _, (same, probes), _ = self._last
            self._fast = _mixrt._GuardedCall(
                variant, len(args), [(i, args[i]) for i, _ in others],
                _module_state.epoch_holder(), epoch, same, probes)
        return out[0] if variant.single else tuple(out)

    def _last_valid(self, positions, others):
        last = self._last
        if last is None or last[0] != _module_state.epoch() or \
                last[1] != (positions, others):
            return None
        same, probes = last[2]
        for kind, holder, key, obj in same:
            if _read_same(kind, holder, key) is not obj:
                return None
        for read, picture in probes:
            if read() != picture:
                return None
        return last[3]

    def _variant(self, args, positions, others):
        epoch = _module_state.epoch()
        items, probes = _guards(self._fn)
        key = (positions, others, items)
        variant = self._variants.get(key)
        if variant is None:
            if len(self._variants) >= _RECOMPILE_LIMIT:
                if self._fullgraph:
                    raise RuntimeError(
                        f"compile: recompile limit ({_RECOMPILE_LIMIT}) "
                        f"reached with fullgraph=True: a guarded Python "
                        f"value changes on every call")
                self.eager_fallbacks += 1
                return None
            variant = self._compile(args, positions)
            self._variants[key] = variant
        self._last = (epoch, (positions, others), probes, variant)
        return variant

    def _compile(self, args, positions):
        variant = _Variant()
        fixed = list(args)
        fn = self._fn

        def traced(*tensors):
            full = list(fixed)
            for i, t in zip(positions, tensors):
                full[i] = t
            out = fn(*full)
            variant.single = isinstance(out, Tensor)
            return out

        variant.traced = traced
        variant.compiled = _mixrt._compile(traced, self._mode,
                                           self._fullgraph, self._dynamic)
        return variant

    def explain(self):
        """What the core did for each variant: graphs, fusion, fallbacks."""
        return "\n".join(v.compiled.explain() for v in self._variants.values())

    @property
    def compiles(self):
        return sum(v.compiled.compiles for v in self._variants.values())

    @property
    def replays(self):
        return sum(v.compiled.replays for v in self._variants.values())


class CompiledModule:
    """What mixrt.compile returns for a module: called like it; every other
    attribute is the module's (parameters(), train(), state_dict())."""

    def __init__(self, module, mode, fullgraph, dynamic):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled",
                           CompiledFunction(module.__call__, mode, fullgraph,
                                            dynamic))

    def __call__(self, *args):
        return self._compiled(*args)

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def explain(self):
        return self._compiled.explain()


def compile(model=None, *, fullgraph=False, dynamic=None, mode=None,  # noqa: A001
            backend=None, options=None):
    """torch.compile's signature: a function or a Module, or a decorator
    (``@mixrt.compile`` or ``@mixrt.compile(mode="reduce-overhead")``)."""
    mode = mode or "default"
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(_MODES)}")
    if backend not in (None, "inductor", "mixrt"):
        raise ValueError(f"compile: backend {backend!r} is not available "
                         f"(mixrt compiles with its own)")
    if options:
        raise ValueError("compile: options are not supported")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError("compile: dynamic must be True, False or None")

    def wrap(target):
        if isinstance(target, Module):
            return CompiledModule(target, mode, bool(fullgraph), dynamic)
        if not callable(target):
            raise RuntimeError(
                f"compile: expected a function or a Module, got "
                f"{type(target).__name__}")
        return CompiledFunction(target, mode, bool(fullgraph), dynamic)

    if model is None:
        return wrap
    return wrap(model)
