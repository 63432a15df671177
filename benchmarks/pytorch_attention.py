"""PyTorch's F.scaled_dot_product_attention on the CPU with the sizes of
benchmarks/attention_benchmark.cc: the fused kernel PyTorch picks against its
math path, forward and forward + backward; median milliseconds.

  python pytorch_attention.py --seqs=512,1024 [--batch 8 --heads 8 ...]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def run(q, k, v, causal, backward, backend, repeats):
    times = []
    for r in range(repeats + 1):
        for t in (q, k, v):
            t.grad = None
        start = time.perf_counter()
        with sdpa_kernel(backend):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if backward:
            y.sum().backward()
        if r > 0:
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", default="512,1024,2048,4096")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head_dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max_math_seq", type=int, default=2048)
    # The mixrt benchmark's selection flags, so one command line selects
    # the same cases in both.
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--causal", default="yes,no")
    p.add_argument("--passes", default="fwd,fwd+bwd")
    p.add_argument("--math", default="true")
    a, _ = p.parse_known_args()
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    chosen = a.dtypes.split(",")
    for name in chosen:
        if name not in dtypes:
            p.error(f"--dtypes: unknown dtype {name!r} (expected f32, bf16)")
    for flag, value, allowed in (("--causal", a.causal, ("yes", "no")),
                                 ("--passes", a.passes, ("fwd", "fwd+bwd"))):
        for v in value.split(","):
            if v not in allowed:
                p.error(f"{flag}: unknown value {v!r} (expected "
                        f"{', '.join(allowed)})")
    with_math = a.math.lower() in ("true", "1", "yes")
    print(f"PyTorch {torch.__version__} F.scaled_dot_product_attention, "
          f"{torch.get_num_threads()} threads; median of {a.repeats}")
    print(f"{'seq':<6} {'dtype':<5} {'causal':<7} {'pass':<9} "
          f"{'fused ms':>11} {'math ms':>11} {'speedup':>8}")
    for seq in [int(s) for s in a.seqs.split(",")]:
        for dtype in (dtypes[n] for n in chosen):
            g = torch.Generator().manual_seed(1)
            q, k, v = (torch.randn(a.batch, a.heads, seq, a.head_dim,
                                   generator=g).to(dtype).requires_grad_()
                       for _ in range(3))
            for causal in (c == "yes" for c in a.causal.split(",")):
                for backward in (p_ == "fwd+bwd" for p_ in a.passes.split(",")):
                    fused = run(q, k, v, causal, backward,
                                SDPBackend.FLASH_ATTENTION, a.repeats)
                    name = "f32" if dtype == torch.float32 else "bf16"
                    line = (f"{seq:<6} {name:<5} {'yes' if causal else 'no':<7} "
                            f"{'fwd+bwd' if backward else 'fwd':<9} {fused:>11.1f}")
                    if with_math and (not backward or seq <= a.max_math_seq):
                        math = run(q, k, v, causal, backward, SDPBackend.MATH,
                                   a.repeats)
                        line += f" {math:>11.1f} {math / fused:>7.2f}x"
                    print(line, flush=True)


if __name__ == "__main__":
    main()
