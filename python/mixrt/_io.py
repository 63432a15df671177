"""mixrt.save / mixrt.load: a dict of tensors and numbers (a state_dict)
in the core's checkpoint format: written atomically (an exclusive
temporary renamed into place), verified on load (a truncated or
bit-flipped file is refused, never half-read)."""

import os

from . import _mixrt


def _path(f):
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    raise TypeError(
        f"expected a file path (str or os.PathLike), got {type(f).__name__}; "
        f"file objects are not supported (the write is atomic by path)")


def save(obj, f):
    if not isinstance(obj, dict):
        raise TypeError(
            f"save: expected a dict of tensors and numbers (a state_dict), "
            f"got {type(obj).__name__}")
    _mixrt._save(obj, _path(f))


def load(f, map_location=None, weights_only=True):
    if map_location not in (None, "cpu"):
        raise ValueError("load: map_location must be None or 'cpu'")
    return _mixrt._load(_path(f))
