"""A process forked after mixrt ran a multi-threaded op (Linux's default
multiprocessing start method, and so DataLoader-style workers) runs ops in
the child: GNU OpenMP's thread pool does not survive fork, and the child's
first matmul used to wait forever for it. The child runs single-threaded
(as PyTorch's forked DataLoader workers do); the parent keeps its threads.
Each case runs in a fresh interpreter with two threads and a time limit,
so a hang fails the test instead of stopping the suite."""

import os
import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent("""
    import multiprocessing as mp
    import os
    import numpy as np
    import mixrt

    a = mixrt.randn(512, 512)
    want = (a @ a).numpy()  # Two threads: the pool now exists.

    def product(seed):
        m = mixrt.tensor(np.full((64, 64), seed, dtype=np.float32))
        return float((m @ m).sum().item())

    {body}
""")

_FORK = """
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    got = (a @ a).numpy()
    os.write(w, b"ok" if np.allclose(got, want, rtol=1e-5, atol=1e-4) else b"wrong")
    os._exit(0)
os.close(w)
print(os.read(r, 16).decode())
os.waitpid(pid, 0)
assert np.allclose((a @ a).numpy(), want)  # The parent still computes.
"""

_POOL = """
with mp.get_context("fork").Pool(2) as pool:
    print(pool.map(product, [1, 2, 3, 4]))
"""


def _run(body):
    # Two threads whatever else runs (load-aware threads would take one on a
    # busy two-core machine, and nothing would be left to hang).
    env = dict(os.environ, MIXRT_NUM_THREADS="2",
               MIXRT_CPU_LOAD_AWARE_THREADS="0")
    return subprocess.run([sys.executable, "-c", _SCRIPT.format(body=body)],
                          env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_forked_child_runs_ops_after_threads_ran_in_the_parent():
    done = _run(_FORK)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "ok", done.stdout + done.stderr


def test_fork_pool_workers_compute():
    done = _run(_POOL)
    assert done.returncode == 0, done.stderr
    # sum(m @ m) for m all s, 64 x 64: 64^3 s^2.
    assert done.stdout.strip() == str([64.0 ** 3 * s * s for s in (1, 2, 3, 4)])
