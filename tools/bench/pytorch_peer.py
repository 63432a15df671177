"""The PyTorch peer of `mixrt bench --peers=pytorch`: runs the same cases,
sizes, precisions and modes in PyTorch on the CPU with the same thread
count and timing rules, and writes results in mixrt bench's JSON shape.

    python pytorch_peer.py CASES.json OUT.json

CASES.json: {"cases": [{"case", "kind", "params"}], "precisions": [...],
"modes": [...], "timing": {...}, "threads": N}. Compile modes run
torch.compile(mode=...); "eager" runs eagerly.
"""
import json
import math
import statistics
import sys
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


def time_steps(step, t):
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
            st = summarize(samples)
            if st["cv"] <= t["max_noise"]:
                noise_met = True
                break
        if elapsed >= t["timeout_s"] and len(samples) >= 2:
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


def main():
    spec = json.load(open(sys.argv[1]))
    torch.set_num_threads(spec["threads"])
    results = []
    for c in spec["cases"]:
        for precision in spec["precisions"]:
            for mode in spec["modes"]:
                r = {"case": c["case"], "kind": c["kind"], "params": c["params"],
                     "backend": "pytorch", "device": "cpu",
                     "precision": precision, "mode": mode,
                     "peer_version": torch.__version__, "reason": "",
                     "support": "", "reproduce": ""}
                try:
                    step, flops = make_step(c, precision, mode)
                    if step is None:
                        continue
                    r["timing"] = time_steps(step, spec["timing"])
                    r["status"] = "ok"
                    r["flops_per_step"] = flops
                    r["gflops"] = flops / (r["timing"]["median_ms"] * 1e6) if flops else 0.0
                except Exception as e:  # A peer's failure is a result too.
                    r["status"] = "error"
                    r["reason"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                results.append(r)
                print(f"pytorch {c['case']} {precision} {mode}: {r['status']}",
                      file=sys.stderr, flush=True)
    json.dump(results, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
