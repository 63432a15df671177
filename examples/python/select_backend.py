"""Which backends mixrt found, why each can or cannot run, and running the
same computation on each usable one (the reference plugin is the oracle).

    python examples/python/select_backend.py
"""

import mixrt

info = mixrt.backends.info()
for plugin in info.get("plugins", []):
    print(f"{plugin.get('path', '?')}: {plugin.get('state', '?')}"
          f" {plugin.get('reason', '')}".rstrip())
print("usable, best first:", ", ".join(mixrt.backends.list()))

results = {}
for name in mixrt.backends.list():
    mixrt.backends.select(name)
    mixrt.manual_seed(0)
    a, b = mixrt.randn(64, 64), mixrt.randn(64, 64)
    results[name] = (a @ b).sum().item()
    print(f"{name:10s} sum(a @ b) = {results[name]:.6f}")
mixrt.backends.select(mixrt.backends.list()[0])
