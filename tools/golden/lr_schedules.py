#!/usr/bin/env python3
"""Records torch.optim.lr_scheduler's learning rates, step by step, for the
schedules mixrt mirrors: StepLR, CosineAnnealingLR (past T_max too),
LinearLR, LambdaLR, a LinearLR warm-up composed with a StepLR on one
optimizer, and ReduceLROnPlateau on a scripted metric sequence.

Run by hand, never in CI (it needs PyTorch, ~6 GB):
    v/bin/python tools/golden/lr_schedules.py \
        > tests/train/golden/lr_schedules.tsv

tests/train/lr_scheduler_golden_test.cc replays each case in mixrt and
requires the same learning rate bit for bit (float.hex) after creation
(epoch 0) and after every step.
"""
import sys

import torch
from torch.optim import lr_scheduler as S

PLATEAU_METRICS = [1.0, 0.9, 0.95, 0.96, 0.97, 0.85, 0.86, 0.87, 0.88, 0.89,
                   0.9, 0.91, 0.92, 0.5, 0.5, 0.5, 0.5, 0.5, float("nan"),
                   0.5, 0.5]


def optimizer(lr):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def lr_of(opt):
    return opt.param_groups[0]["lr"]


def schedule(name, make, steps, lr=0.1):
    opt = optimizer(lr)
    scheds = make(opt)
    rows = [(name, 0, lr_of(opt))]
    for epoch in range(1, steps + 1):
        opt.step()
        for s in scheds:
            s.step()
        rows.append((name, epoch, lr_of(opt)))
    return rows


def plateau():
    opt = optimizer(0.1)
    s = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2,
                            threshold=1e-4, cooldown=1, min_lr=0.01)
    rows = [("plateau", 0, lr_of(opt))]
    for epoch, metric in enumerate(PLATEAU_METRICS, 1):
        opt.step()
        s.step(metric)
        rows.append(("plateau", epoch, lr_of(opt)))
    return rows


def main():
    rows = []
    rows += schedule("step", lambda o: [S.StepLR(o, step_size=3, gamma=0.5)],
                     10)
    rows += schedule("cosine",
                     lambda o: [S.CosineAnnealingLR(o, T_max=5, eta_min=1e-3)],
                     17)
    rows += schedule("linear",
                     lambda o: [S.LinearLR(o, start_factor=0.25,
                                           end_factor=1.0, total_iters=4)], 8)
    rows += schedule("lambda",
                     lambda o: [S.LambdaLR(o, lambda e: 0.95 ** e)], 6)
    rows += schedule("warmup_then_step",
                     lambda o: [S.LinearLR(o, start_factor=0.5,
                                           total_iters=3),
                                S.StepLR(o, step_size=2, gamma=0.5)], 8)
    rows += plateau()
    out = sys.stdout
    out.write(f"# torch {torch.__version__}: case, epoch, lr (float.hex)\n")
    for name, epoch, lr in rows:
        out.write(f"{name}\t{epoch}\t{float(lr).hex()}\n")


if __name__ == "__main__":
    main()
