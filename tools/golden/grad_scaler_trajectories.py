#!/usr/bin/env python3
"""Records torch.amp.GradScaler("cpu")'s trajectory for scripted patterns of
finite and non-finite gradients: after every update(), the scale's f32 bits,
the growth tracker and whether the optimizer step was skipped.

Run by hand, never in CI (it needs PyTorch, ~6 GB):
    v/bin/python tools/golden/grad_scaler_trajectories.py \
        > tests/amp/golden/grad_scaler_trajectories.tsv

tests/amp/grad_scaler_golden_test.cc replays each pattern in mixrt and
requires the same scale bit for bit, the same tracker and the same skips.
"""
import struct
import sys

import torch

# name -> (GradScaler kwargs, pattern: "F" finite gradients, "I" an inf, "N" a NaN)
CASES = {
    "default": (dict(), "F" * 2003 + "IFNF" + "F" * 1999 + "IIF"),
    "nonpow2": (dict(init_scale=1000.0, growth_factor=1.1, backoff_factor=0.3,
                     growth_interval=3),
                "FFFFFFIFFFFFFFNFFFIIIFFFFFFFFFFFFFFFFFFFFFFFFFFIFFFFFFFF"),
    "backoff09": (dict(init_scale=3.0e4, growth_factor=1.1, backoff_factor=0.9,
                       growth_interval=2),
                  "IIIIIIIIIIFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFIFIFIFIFFFFFFF"),
}


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    out = sys.stdout
    out.write(f"# torch {torch.__version__}: GradScaler('cpu') after each "
              "update(); written by tools/golden/grad_scaler_trajectories.py\n")
    out.write("# case\tinit_scale growth_factor backoff_factor growth_interval\n")
    out.write("case\tstep\tgrad\tscale_bits\tgrowth_tracker\tskipped\n")
    for name, (kwargs, pattern) in CASES.items():
        scaler = torch.amp.GradScaler("cpu", **kwargs)
        out.write(f"# {name}\t{scaler.get_scale()} {scaler.get_growth_factor()} "
                  f"{scaler.get_backoff_factor()} {scaler.get_growth_interval()}\n")
        w = torch.nn.Parameter(torch.ones(4))
        opt = torch.optim.SGD([w], lr=0.1)
        for step, kind in enumerate(pattern):
            opt.zero_grad()
            loss = (w * torch.arange(4.0)).sum()
            scaler.scale(loss).backward()
            if kind == "I":
                w.grad[1] = float("inf")
            elif kind == "N":
                w.grad[2] = float("nan")
            before = w.detach().clone()
            scaler.step(opt)
            skipped = bool(torch.equal(before, w.detach()))
            scaler.update()
            out.write(f"{name}\t{step}\t{kind}\t{f32_bits(scaler.get_scale()):08x}\t"
                      f"{scaler._get_growth_tracker()}\t{int(skipped)}\n")


if __name__ == "__main__":
    main()
