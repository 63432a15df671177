"""mixrt.autocast: torch.autocast's context manager and decorator over the
core's AutocastGuard (per-op precision, cast cache, nesting)."""

from . import _mixrt
from ._tensor import _GuardContext


class autocast(_GuardContext):  # noqa: N801 (torch's name)
    """``with mixrt.autocast("cpu"):`` runs the ops of the autocast lists
    in the device type's lower precision (bfloat16 on "cpu" unless `dtype`
    says otherwise). As a decorator it wraps a function the same way."""

    def __init__(self, device_type, dtype=None, enabled=True,
                 cache_enabled=None):
        super().__init__()
        if not isinstance(device_type, str):
            raise ValueError(
                f"Expected `device_type` of type `str`, got: "
                f"`{type(device_type)}`")
        if dtype is not None and not isinstance(dtype, _mixrt.dtype):
            raise TypeError(f"dtype must be a mixrt.dtype, got {dtype!r}")
        self.device = device_type
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled

    def _guard(self):
        return _mixrt._autocast(self.device, self.fast_dtype, self._enabled,
                                self._cache_enabled)

    def _clone(self):
        return autocast(self.device, self.fast_dtype, self._enabled,
                        self._cache_enabled)


def is_autocast_enabled(device_type="cpu"):
    return _mixrt.is_autocast_enabled(device_type)


def get_autocast_dtype(device_type="cpu"):
    return _mixrt.get_autocast_dtype(device_type)
