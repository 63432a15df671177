"""compile_benchmark's inference cases in PyTorch on the CPU: eager vs
torch.compile ("default", "max-autotune") in one process, the modes timed
in interleaved rounds as compile_benchmark times mixrt's. The transformer
block is pytorch_gpt.py's Block (pre-LayerNorm, fused-QKV causal
attention, 4x GELU MLP) under bf16 autocast and inference_mode; the CNN
is three conv(3x3, padding 1, no bias) + BatchNorm2d + ReLU, a max pool
after the first, in eval(). Prints median ms per call and the ratio to
eager.

  python pytorch_compile.py --steps 200 --modes eager,default,max-autotune
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn

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
    block = Block(256, 4, 0.0)
    yield ("transformer block bf16 infer", block, torch.randn(8, 128, 256), torch.bfloat16)
    yield ("CNN bf16 infer (32px, 32ch)", cnn(32), torch.randn(32, 3, 32, 32), torch.bfloat16)
    yield ("CNN f32 infer (32px, 32ch)", cnn(32), torch.randn(32, 3, 32, 32), None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--modes", default="eager,default,max-autotune")
    p.add_argument("--cases", default="", help="only cases whose name contains this")
    a = p.parse_args()
    torch.manual_seed(0)
    modes = a.modes.split(",")
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {a.steps} calls")
    print(f"{'case':<30} {'mode':<16} {'ms/call':>10} {'vs eager':>9} {'first call':>12}")
    for name, model, x, dtype in cases(a):
        if a.cases not in name:
            continue
        model.eval()
        fns, first = {}, {}
        for mode in modes:
            fn = model if mode == "eager" else torch.compile(model, mode=mode)

            def call(fn=fn):
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
