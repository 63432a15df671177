"""compile_benchmark's cases in PyTorch on the CPU: eager vs torch.compile
("default", "max-autotune") in one process, the modes timed in
interleaved rounds as compile_benchmark times mixrt's. Inference: the
transformer block (pytorch_gpt.py's Block: pre-LayerNorm, fused-QKV
causal attention, 4x GELU MLP) under bf16 autocast and inference_mode,
and a CNN of three conv(3x3, padding 1, no bias) + BatchNorm2d + ReLU, a
max pool after the first, in eval(). Training (--train): the block's step
(mse loss) and the recipe MLP's (Linear 1024 x3 + ReLU, batch 512, cross
entropy), bf16 autocast + GradScaler, SGD lr 1e-3, the loss function
compiled and the optimizer eager as in compile_benchmark. Prints median
ms per call and the ratio to eager.

  python pytorch_compile.py --steps 200 --modes eager,default,max-autotune
"""
import argparse
import copy
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytorch_gpt import Block


def cnn(channels):
    layers, width = [], 3
    for i in range(3):
        layers += [nn.Conv2d(width, channels, 3, padding=1, bias=False),
                   nn.BatchNorm2d(channels), nn.ReLU()]
        if i == 0:
            layers.append(nn.MaxPool2d(2, 2))
        width = channels
    return nn.Sequential(*layers)


def cases(a):
    if a.train:
        mlp = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                            nn.Linear(1024, 1024))
        yield ("recipe MLP bf16+scaler", mlp, torch.randn(512, 1024),
               torch.arange(512) % 1024)
        yield ("transformer block bf16+scaler", Block(256, 4, 0.0), torch.randn(8, 128, 256),
               torch.randn(8, 128, 256))
        return
    block = Block(256, 4, 0.0)
    yield ("transformer block bf16 infer", block, torch.randn(8, 128, 256), torch.bfloat16)
    yield ("CNN bf16 infer (32px, 32ch)", cnn(32), torch.randn(32, 3, 32, 32), torch.bfloat16)
    yield ("CNN f32 infer (32px, 32ch)", cnn(32), torch.randn(32, 3, 32, 32), None)


def train_step(model, x, target, mode):
    """A step as compile_benchmark's: the loss compiled, the rest eager."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    classes = target.dtype == torch.int64

    def loss_fn(x, target):
        out = model(x)
        return F.cross_entropy(out, target) if classes else F.mse_loss(out, target)
    loss = loss_fn if mode == "eager" else torch.compile(loss_fn, mode=mode)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            value = loss(x, target)
        scaler.scale(value).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--modes", default="eager,default,max-autotune")
    p.add_argument("--cases", default="", help="only cases whose name contains this")
    p.add_argument("--train", action="store_true", help="the training cases instead")
    a = p.parse_args()
    torch.manual_seed(0)
    modes = a.modes.split(",")
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {a.steps} calls")
    print(f"{'case':<30} {'mode':<16} {'ms/call':>10} {'vs eager':>9} {'first call':>12}")
    for name, model, x, extra in cases(a):
        if a.cases not in name:
            continue
        fns, first = {}, {}
        for mode in modes:
            if a.train:
                # Each mode trains its own copy, as compile_benchmark's runners.
                call = train_step(copy.deepcopy(model), x, extra, mode)
            else:
                model.eval()
                fn = model if mode == "eager" else torch.compile(model, mode=mode)

                def call(fn=fn, dtype=extra):
                    with torch.inference_mode(), torch.autocast(
                            "cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                        return fn(x)
            start = time.perf_counter()
            call()
            first[mode] = (time.perf_counter() - start) * 1e3
            for _ in range(max(3, a.steps // 10)):
                call()
            fns[mode] = call
        times = {mode: [] for mode in modes}
        rounds = min(8, a.steps)
        for r in range(rounds):
            for mode in modes:
                for _ in range(a.steps // rounds):
                    start = time.perf_counter()
                    fns[mode]()
                    times[mode].append((time.perf_counter() - start) * 1e3)
        eager = statistics.median(times["eager"]) if "eager" in times else 0
        for mode in modes:
            m = statistics.median(times[mode])
            ratio = eager / m if eager else 0
            print(f"{name:<30} {mode:<16} {m:10.3f} {ratio:8.2f}x {first[mode]:9.1f} ms")


if __name__ == "__main__":
    main()
