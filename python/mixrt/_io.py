"""mixrt.save / mixrt.load: a state_dict in the core's checkpoint format,
written atomically (an exclusive temporary renamed into place) and verified
on load (a truncated or bit-flipped file is refused, never half-read).

A flat dict of tensors and numbers is stored as it is. Anything nested, as
torch.save users write ({"model": model.state_dict(), "optimizer":
opt.state_dict(), "epoch": 3}), is stored as its tensors under path-like
names plus one entry describing the structure (JSON text as an int32
tensor): dicts with str or int keys, lists, tuples, and leaves that are
tensors, ints, floats, bools, None or strings. Loading rebuilds exactly
that; nothing in a file is ever executed or imported (no pickle)."""

import json
import os

from . import _mixrt
from ._mixrt import Tensor
from ._tensor import tensor

# The entry that holds a nested checkpoint's structure.
_STRUCTURE = "__mixrt_structure_v1__"
# Deeper than any state_dict; a file nesting further is refused.
_MAX_DEPTH = 64


def _path(f):
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    raise TypeError(
        f"expected a file path (str or os.PathLike), got {type(f).__name__}; "
        f"file objects are not supported (the write is atomic by path)")


def _is_flat(obj):
    return all(isinstance(k, str) and k != _STRUCTURE and
               isinstance(v, (Tensor, int, float)) for k, v in obj.items())


def _describe(obj, path, tensors, depth=0):
    """obj as JSON-able structure; its tensors into `tensors` by name."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"save: {path or 'the object'} nests deeper than "
                         f"{_MAX_DEPTH} levels")
    if isinstance(obj, Tensor):
        name = path or "tensor"
        while name in tensors or name == _STRUCTURE:
            name += "'"
        tensors[name] = obj
        return {"t": name}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(
                    f"save: {path or 'the dict'} has a key of type "
                    f"{type(k).__name__}; a checkpoint's dict keys are str "
                    f"or int")
            items.append([k, _describe(v, f"{path}/{k}" if path else str(k),
                                       tensors, depth + 1)])
        return {"d": items}
    if isinstance(obj, (list, tuple)):
        values = [_describe(v, f"{path}/{i}" if path else str(i), tensors,
                            depth + 1) for i, v in enumerate(obj)]
        return {"u" if isinstance(obj, tuple) else "l": values}
    raise TypeError(
        f"save: {path or 'the object'} is a {type(obj).__name__}; a "
        f"checkpoint holds tensors, ints, floats, bools, None, strings and "
        f"dicts, lists and tuples of them")


def _rebuild(node, tensors, depth=0):
    if depth > _MAX_DEPTH:
        raise ValueError(f"load: the checkpoint's structure nests deeper "
                         f"than {_MAX_DEPTH} levels")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (kind, value), = node.items()
        if kind == "t" and isinstance(value, str) and value in tensors:
            return tensors[value]
        if kind == "d" and isinstance(value, list):
            out = {}
            for item in value:
                if not (isinstance(item, list) and len(item) == 2 and
                        isinstance(item[0], (str, int)) and
                        not isinstance(item[0], bool)):
                    break
                out[item[0]] = _rebuild(item[1], tensors, depth + 1)
            else:
                return out
        if kind in ("l", "u") and isinstance(value, list):
            values = [_rebuild(v, tensors, depth + 1) for v in value]
            return tuple(values) if kind == "u" else values
    raise ValueError(f"load: the checkpoint's structure entry is malformed "
                     f"at {json.dumps(node)[:80]!r}")


def save(obj, f):
    if not isinstance(obj, dict):
        raise TypeError(
            f"save: expected a dict (a state_dict, or a dict of them), got "
            f"{type(obj).__name__}")
    path = _path(f)
    if _is_flat(obj):
        _mixrt._save(obj, path)
        return
    tensors = {}
    structure = json.dumps(_describe(obj, "", tensors)).encode()
    tensors[_STRUCTURE] = tensor(list(structure), dtype=_mixrt.dtype.int32)
    _mixrt._save(tensors, path)


def load(f, map_location=None, weights_only=True):
    if map_location not in (None, "cpu"):
        raise ValueError("load: map_location must be None or 'cpu'")
    entries = _mixrt._load(_path(f))
    structure = entries.pop(_STRUCTURE, None)
    if structure is None:
        return entries
    if not isinstance(structure, Tensor) or structure.ndim != 1:
        raise ValueError("load: the checkpoint's structure entry is not a "
                         "1-D tensor")
    try:
        node = json.loads(bytes(structure.numpy().astype("uint8")).decode())
    except (ValueError, RecursionError) as e:
        raise ValueError(f"load: the checkpoint's structure entry is not "
                         f"valid JSON ({e})") from None
    try:
        return _rebuild(node, entries)
    except RecursionError:
        raise ValueError("load: the checkpoint's structure nests too deeply") \
            from None
