"""mixrt.backends: the backends the registry found, why each can or cannot
run, and which one runs the ops (`mixrt info` from Python)."""

import json

from . import _mixrt


def info():
    """The same report as ``mixrt info --json``: plugins, their state and
    reason, devices and the per-op-class precision capability matrix."""
    return json.loads(_mixrt._info_json())


def list():  # noqa: A001 (the issue's name)
    """Names of the usable backends, best first."""
    return _mixrt._usable_backends()


def load_plugin(path, isolate=False, arena_bytes=None):
    """Loads the plugin file at `path`; returns its backend's name.

    With ``isolate=True`` the plugin runs out of process (in
    mixrt-plugin-host): if it crashes or hangs, its backend fails with the
    reason (RuntimeError on every later call) and Python goes on. Set
    MIXRT_PLUGIN_ISOLATION=all or names before import for the plugins
    mixrt finds itself. ``arena_bytes`` sizes the memory shared with that
    process (default: $MIXRT_PLUGIN_ARENA_BYTES, else the machine's memory,
    or half of what an address-space limit such as ``ulimit -v`` leaves)."""
    if arena_bytes is not None:
        if not isolate:
            raise ValueError("arena_bytes is for a plugin loaded with isolate=True")
        if isinstance(arena_bytes, bool) or not isinstance(arena_bytes, int) or arena_bytes <= 0:
            raise ValueError(
                f"arena_bytes must be a positive int (bytes), got {arena_bytes!r}")
    return _mixrt._load_plugin(str(path), bool(isolate), int(arena_bytes or 0))


def select(name):
    """Makes backend `name` the one new tensors are created on."""
    _mixrt._select(name)


def current():
    """The device new tensors are created on ("cpu:0")."""
    return _mixrt._current_device()
