#!/usr/bin/env python3
"""Records torch.optim.AdamW's f32 parameters step by step: plain, with
amsgrad=True (a large first gradient, then smaller ones, so the running
maximum of exp_avg_sq decides the later steps), and amsgrad with
maximize=True, at a large learning rate where rounding shows.

Run by hand, never in CI (it needs PyTorch, ~6 GB):
    v/bin/python tools/golden/adamw_trajectories.py \
        > tests/train/golden/adamw_trajectories.tsv

tests/train/adamw_golden_test.cc replays each case in mixrt with the
gradients recorded here and compares every parameter after every step.

Columns: case, step (0: the initial values), index, gradient of that step
(float.hex; "-" at step 0), parameter after it (float.hex).
"""
import math

import torch

N = 16
STEPS = 6
CASES = [
    ("adamw", dict(lr=0.1, betas=(0.9, 0.999), weight_decay=0.01)),
    ("adamw_amsgrad",
     dict(lr=0.1, betas=(0.9, 0.99), weight_decay=0.01, amsgrad=True)),
    ("adamw_amsgrad_maximize",
     dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True,
          maximize=True)),
]


def gradient(step, i):
    # Large at the first step, then an order of magnitude smaller.
    size = 4.0 if step == 1 else 0.3
    return size * math.sin(1.7 * i + 0.9 * step)


def main():
    print("# case\tstep\tindex\tgrad\tparam")
    for name, options in CASES:
        initial = [math.cos(0.37 * i) for i in range(N)]
        param = torch.nn.Parameter(torch.tensor(initial, dtype=torch.float32))
        opt = torch.optim.AdamW([param], foreach=False, **options)
        for i in range(N):
            print(f"{name}\t0\t{i}\t-\t{param[i].item().hex()}")
        for step in range(1, STEPS + 1):
            grad = torch.tensor([gradient(step, i) for i in range(N)],
                                dtype=torch.float32)
            param.grad = grad.clone()
            opt.step()
            for i in range(N):
                print(f"{name}\t{step}\t{i}\t{grad[i].item().hex()}\t"
                      f"{param[i].item().hex()}")


if __name__ == "__main__":
    main()
