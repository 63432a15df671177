#!/usr/bin/env python3
"""Records torch.optim.lr_scheduler's learning rates, step by step, for the
schedules mixrt mirrors: StepLR, CosineAnnealingLR (past T_max too),
LinearLR, LambdaLR, a LinearLR warm-up composed with a StepLR (and with a
CosineAnnealingLR, whose base lr is the optimizer's initial one) on one
optimizer, ReduceLROnPlateau on a scripted metric sequence, OneCycleLR
(cos and linear, two and three phases, with the momentum or AdamW's beta1
it cycles: cases "<name>/momentum") and SequentialLR.

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


def optimizer(lr, momentum=0.0):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr,
                           momentum=momentum)


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


def momentum_of(opt):
    g = opt.param_groups[0]
    return g["betas"][0] if "betas" in g else g["momentum"]


def one_cycle(name, opt, steps, **kwargs):
    s = S.OneCycleLR(opt, **kwargs)
    rows = [(name, 0, lr_of(opt))]
    momenta = [(name + "/momentum", 0, momentum_of(opt))]
    for epoch in range(1, steps + 1):
        opt.step()
        s.step()
        rows.append((name, epoch, lr_of(opt)))
        momenta.append((name + "/momentum", epoch, momentum_of(opt)))
    return rows + momenta


def adamw(lr):
    return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def sequential(name, make, milestones, steps, lr=0.1):
    opt = optimizer(lr)
    s = S.SequentialLR(opt, make(opt), milestones=milestones)
    rows = [(name, 0, lr_of(opt))]
    for epoch in range(1, steps + 1):
        opt.step()
        s.step()
        rows.append((name, epoch, lr_of(opt)))
    return rows


def two_groups(name, make, steps):
    """Param groups of lr 0.1 and 0.01: cases "<name>/0" and "<name>/1"."""
    opt = torch.optim.SGD(
        [{"params": [torch.nn.Parameter(torch.zeros(1))]},
         {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.01}],
        lr=0.1)
    scheds = make(opt)
    rows = {0: [], 1: []}
    for epoch in range(steps + 1):
        if epoch > 0:
            opt.step()
            for s in scheds:
                s.step()
        for g in (0, 1):
            rows[g].append((f"{name}/{g}", epoch, opt.param_groups[g]["lr"]))
    return rows[0] + rows[1]


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
    rows += schedule("warmup_then_cosine",
                     lambda o: [S.LinearLR(o, start_factor=0.5,
                                           total_iters=2),
                                S.CosineAnnealingLR(o, T_max=3)], 9)
    rows += plateau()
    rows += two_groups("two_groups_warmup_cosine",
                       lambda o: [S.LinearLR(o, start_factor=0.5,
                                             total_iters=2),
                                  S.CosineAnnealingLR(o, T_max=3,
                                                      eta_min=0.001)], 8)
    # total_steps = 10 (the last step's lr is the minimum).
    rows += one_cycle("onecycle_cos", optimizer(0.1, momentum=0.9), 9,
                      max_lr=1.0, total_steps=10)
    rows += one_cycle("onecycle_linear_three_phase",
                      optimizer(0.1, momentum=0.9), 11, max_lr=0.5,
                      total_steps=12, pct_start=0.25,
                      anneal_strategy="linear", three_phase=True,
                      div_factor=10.0, final_div_factor=100.0)
    rows += one_cycle("onecycle_adamw", adamw(1e-3), 7, max_lr=0.01,
                      epochs=2, steps_per_epoch=4, base_momentum=0.8,
                      max_momentum=0.9)
    rows += sequential("sequential_warmup_cosine",
                       lambda o: [S.LinearLR(o, start_factor=0.1,
                                             total_iters=3),
                                  S.CosineAnnealingLR(o, T_max=4,
                                                      eta_min=0.001)],
                       [3], 10)
    rows += sequential("sequential_three",
                       lambda o: [S.StepLR(o, step_size=2, gamma=0.5),
                                  S.LambdaLR(o, lambda e: 0.9 ** e),
                                  S.LinearLR(o, start_factor=0.5,
                                             total_iters=2)],
                       [4, 7], 10)
    out = sys.stdout
    out.write(f"# torch {torch.__version__}: case, epoch, lr (float.hex)\n")
    for name, epoch, lr in rows:
        out.write(f"{name}\t{epoch}\t{float(lr).hex()}\n")


if __name__ == "__main__":
    main()
