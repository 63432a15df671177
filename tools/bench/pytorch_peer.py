"""The PyTorch peer of `mixrt bench --peers=pytorch`: runs the same cases,
sizes, precisions and modes in PyTorch on the CPU with the same thread
count and timing rules, and writes results in mixrt bench's JSON shape.

    python pytorch_peer.py CASES.json OUT.json

CASES.json: {"cases": [{"case", "kind", "params"}], "precisions": [...],
"modes": [...], "timing": {...}, "threads": N, "case_limit_s": S,
"compile_limit_s": C, "done": [[case, precision, mode], ...]}. Compile
modes run torch.compile(mode=...); "eager" runs eagerly. A case (one
precision and mode) that takes longer than S seconds (S + C compiled) is
cut off: recorded with status "cut_off" and the process exits with status
75, so that a pathologically slow precision (PyTorch's bf16 GEMM on a CPU
without AVX-512: a minute per 512x4096x4096) never holds the run; mixrt
bench starts it again with the finished cases in "done".
"""
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time

import torch
import torch.nn.functional as F


def summarize(samples):
    s = sorted(samples)
    n = len(s)

    def quantile(q):
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return s[lo] + (pos - lo) * (s[hi] - s[lo])

    mean = sum(s) / n
    stddev = statistics.stdev(s) if n > 1 else 0.0
    return {"unit": "ms", "samples": samples, "count": n,
            "median_ms": quantile(0.5), "min_ms": s[0], "max_ms": s[-1],
            "mean_ms": mean, "stddev_ms": stddev,
            "cv": stddev / mean if mean > 0 else 0.0,
            "p90_ms": quantile(0.9)}


def median_ci_half_width(samples):
    """mixrt's MedianCiHalfWidth: the median's 95% CI from order statistics,
    half its width relative to the median."""
    n = len(samples)
    if n < 2:
        return math.inf
    s = sorted(samples)
    spread = 0.98 * math.sqrt(n)
    lo, hi = math.floor(n / 2 - spread), math.ceil(n / 2 + spread)
    if lo < 0 or hi > n - 1:
        return math.inf
    median = statistics.median(s)
    return (s[hi] - s[lo]) / 2 / median if median > 0 else math.inf


def time_steps(step, t):
    def counted():
        step()
        STEPS_DONE[0] += 1

    return time_counted_steps(counted, t)


def time_counted_steps(step, t):
    begin = time.perf_counter()
    warm = 0
    while True:
        step()
        warm += 1
        if time.perf_counter() - begin >= t["warmup_s"]:
            break
    step_ms = (time.perf_counter() - begin) * 1e3 / warm
    reps = max(1, math.ceil(t["min_sample_ms"] / step_ms)) if step_ms < t["min_sample_ms"] else 1
    samples = []
    start = time.perf_counter()
    noise_met = False
    while True:
        s = time.perf_counter()
        for _ in range(reps):
            step()
        samples.append((time.perf_counter() - s) * 1e3 / reps)
        elapsed = time.perf_counter() - start
        if len(samples) >= t["min_samples"] and elapsed >= t["min_time_s"]:
            if median_ci_half_width(samples) <= t["max_noise"]:
                noise_met = True
                break
        # Past the timeout, stop once `mixrt bench compare` can use the case.
        if elapsed >= t["timeout_s"] and len(samples) >= t["min_comparable_samples"]:
            break
    timing = summarize(samples)
    timing["steps_per_sample"] = reps
    timing["noise_met"] = noise_met
    # The CI of the median by bootstrap, as mixrt's.
    import random
    rng = random.Random(20261123)
    meds = sorted(statistics.median(rng.choices(samples, k=len(samples)))
                  for _ in range(1000))
    timing["median_ci95_ms"] = [meds[int(0.025 * 999)], meds[int(0.975 * 999)]]
    timing["seconds"] = time.perf_counter() - begin
    return timing


BUSY = []  # The busy loops running now (a cut-off kills them).
STEPS_DONE = [0]  # Steps of the running case finished (for a cut-off).


@contextlib.contextmanager
def busy_loops(count):
    """`count` processes spinning beside the timed steps, as mixrt's."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    BUSY.extend(procs)
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
            BUSY.remove(p)


class Block(torch.nn.Module):
    """mixrt's nn::TransformerBlock: pre-norm, causal attention, GELU MLP."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, 4 * width)
        self.proj = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = x + self.out(a.transpose(1, 2).reshape(b, t, c))
        return y + self.proj(F.gelu(self.fc(self.ln_2(y))))


def mlp(width, layers):
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i + 1 < layers:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def make_step(c, precision, mode):
    kind, p = c["kind"], c["params"]
    torch.manual_seed(0)
    if kind in ("gemm", "conv", "sdpa"):
        if precision == "auto" or mode != "eager":
            return None, 0.0
        dt = DTYPES[precision]
        if kind == "gemm":
            shape_a = (p["batch"], p["m"], p["k"]) if p["batch"] > 1 else (p["m"], p["k"])
            shape_b = (p["batch"], p["k"], p["n"]) if p["batch"] > 1 else (p["k"], p["n"])
            a, b = torch.randn(shape_a, dtype=dt), torch.randn(shape_b, dtype=dt)
            flops = 2.0 * p["batch"] * p["m"] * p["n"] * p["k"]
            return (lambda: torch.matmul(a, b)), flops
        if kind == "conv":
            x = torch.randn(p["batch"], p["c"], p["h"], p["w"], dtype=dt)
            w = torch.randn(p["o"], p["c"], p["kernel"], p["kernel"], dtype=dt)
            ho = (p["h"] + 2 * p["padding"] - p["kernel"]) // p["stride"] + 1
            wo = (p["w"] + 2 * p["padding"] - p["kernel"]) // p["stride"] + 1
            flops = 2.0 * p["batch"] * p["o"] * ho * wo * p["c"] * p["kernel"] ** 2
            return (lambda: F.conv2d(x, w, stride=p["stride"], padding=p["padding"])), flops
        shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
        q, k, v = (torch.randn(shape, dtype=dt) for _ in range(3))
        causal = bool(p["causal"])
        flops = 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"] * (0.5 if causal else 1.0)
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), flops
    if precision == "auto":
        return None, 0.0
    width, batch = p["width"], p["batch"]
    if kind.startswith("mlp"):
        net = mlp(width, p["layers"])
        x, y = torch.randn(batch, width), torch.randn(batch, width)
        fwd = 2.0 * batch * width * width * p["layers"]
    else:
        net = Block(width, p["heads"])
        x, y = torch.randn(batch, p["seq"], width), torch.randn(batch, p["seq"], width)
        tokens = batch * p["seq"]
        fwd = tokens * (2.0 * 12 * width * width + 2.0 * p["seq"] * width)
    model = net if mode == "eager" else torch.compile(net, mode=mode)
    use_autocast = precision != "f32"
    dt = DTYPES.get(precision, torch.float32)
    if kind.endswith("_infer"):
        def infer():
            with torch.inference_mode(), torch.autocast("cpu", dtype=dt, enabled=use_autocast):
                return model(x)
        return infer, fwd
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", enabled=use_autocast)

    def train():
        with torch.autocast("cpu", dtype=dt, enabled=use_autocast):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    return train, 3 * fwd


# The exit status of a peer that cut a case off: mixrt bench runs it again
# for the cases left.
CUT_OFF_EXIT = 75


def write_results(path, results):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(results, f)
    os.replace(tmp, path)


def cut_off(path, results, r, limit):
    """Runs on the watchdog's thread when a case passes its limit (torch
    releases the GIL inside its ops): records the case as cut off and ends
    the process, whatever the main thread is computing."""
    r = dict(r, status="cut_off",
             reason=f"peer slower than {limit:g} s: killed after {limit:g} s "
                    f"in this case, {STEPS_DONE[0]} steps done")
    r["cut_off_s"] = limit
    if r["mode"] == "eager":
        # Each step finished took its share of the limit and the one
        # running took more, so one step takes at least this long (a
        # compiled mode's first step holds its compilation: no bound).
        r["cut_off_min_step_ms"] = limit * 1e3 / (STEPS_DONE[0] + 1)
    for p in BUSY:
        p.kill()
    write_results(path, results + [r])
    print(f"pytorch {r['case']} {r['precision']} {r['mode']}: cut off after "
          f"{limit:g} s", file=sys.stderr, flush=True)
    os._exit(CUT_OFF_EXIT)


def main():
    spec = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    torch.set_num_threads(spec["threads"])
    done = {tuple(d) for d in spec.get("done", [])}
    results = []
    for c in spec["cases"]:
        for precision in spec["precisions"]:
            for mode in spec["modes"]:
                if (c["case"], precision, mode) in done:
                    continue
                r = {"case": c["case"], "kind": c["kind"], "params": c["params"],
                     "backend": "pytorch", "device": "cpu",
                     "precision": precision, "mode": mode,
                     "peer_version": torch.__version__, "reason": "",
                     "support": "", "reproduce": ""}
                STEPS_DONE[0] = 0
                limit = spec["case_limit_s"] + (0 if mode == "eager" else spec["compile_limit_s"])
                watchdog = threading.Timer(limit, cut_off, (out, results, r, limit))
                watchdog.daemon = True
                watchdog.start()
                try:
                    step, flops = make_step(c, precision, mode)
                    if step is None:
                        watchdog.cancel()
                        continue
                    with busy_loops(c["params"].get("busy_cores", 0)):
                        r["timing"] = time_steps(step, spec["timing"])
                    r["status"] = "ok"
                    r["flops_per_step"] = flops
                    r["gflops"] = flops / (r["timing"]["median_ms"] * 1e6) if flops else 0.0
                except Exception as e:  # A peer's failure is a result too.
                    r["status"] = "error"
                    r["reason"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                watchdog.cancel()
                results.append(r)
                write_results(out, results)  # What a later cut-off keeps.
                print(f"pytorch {c['case']} {precision} {mode}: {r['status']}",
                      file=sys.stderr, flush=True)
    write_results(out, results)


if __name__ == "__main__":
    main()
