#!/usr/bin/env python3
"""PyTorch's AMP recipe on the CPU, the baseline for examples/amp_recipe.

Same network and sizes as the mixrt example: an MLP of Linear + ReLU layers
of one width, MSE loss, SGD(lr=0.001); default precision and bf16 autocast
(PyTorch refuses f16 autocast on the CPU). Prints ms/step and the process's
peak resident memory (PyTorch keeps no tensor-memory statistics on the CPU).
Run by benchmarks/amp_recipe_vs_pytorch.sh in the same run as mixrt.
"""
import argparse
import resource
import time

import torch


def make_model(width, layers):
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i + 1 < layers:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


def run(args, use_autocast):
    torch.manual_seed(0)
    net = make_model(args.width, args.layers)
    opt = torch.optim.SGD(net.parameters(), lr=0.001)
    data = [torch.randn(args.batch, args.width) for _ in range(args.batches)]
    targets = [torch.randn(args.batch, args.width) for _ in range(args.batches)]
    loss_fn = torch.nn.MSELoss()
    steps = 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        for x, t in zip(data, targets):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_autocast):
                loss = loss_fn(net(x), t)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steps += 1
    return 1000 * (time.perf_counter() - start) / steps, float(loss)


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return True  # Unknown: run it, as asked of a CPU that may have it.
    return "avx512_bf16" in flags or "amx_bf16" in flags


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bf16", choices=("auto", "yes", "no"), default="auto",
                   help="run the bf16 autocast step; auto: only on a CPU with "
                        "avx512_bf16 or AMX (elsewhere PyTorch's bf16 GEMM "
                        "takes about a minute per 512x4096x4096)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)  # PyTorch uses 1 thread here otherwise.
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads")
    modes = [("default precision", False)]
    if args.bf16 == "yes" or (args.bf16 == "auto" and cpu_has_bf16()):
        modes.append(("autocast", True))
    else:
        print("pytorch autocast             bf16  skipped: this CPU has no "
              "avx512_bf16 or AMX, where PyTorch's bf16 GEMM is ~400x slower "
              "than its f32 (--bf16=yes runs it)")
    for name, amp in modes:
        ms, loss = run(args, amp)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"pytorch {name:<20} {'bf16' if amp else 'f32':<5} {ms:8.1f} ms/step"
              f"  peak RSS {peak:7.1f} MiB  final loss {loss:.5f}")


if __name__ == "__main__":
    main()
