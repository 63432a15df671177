"""mixrt's Python package beside PyTorch in one run: the call overhead of
a small op, a tiny MLP's train step eager and compiled, and the AMP
recipe's step. Each library is timed in a process of its own (two OpenMP
runtimes in one process spin against each other), one after the other,
with the same interpreter and 2 threads. Prints times, ratios (> 1: mixrt
faster) and each process's peak resident memory.

    PYTHONPATH=<mixrt package dir> python benchmarks/python/python_vs_pytorch.py
    (run with an interpreter that has torch; without it, mixrt alone)
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

mixrt = torch = mnn = MF = None  # Imported by the child that times them.


def per_call_us(fn, calls, repeats=7):
    for _ in range(max(10, calls // 20)):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    # The fastest repeat, as timeit advises: slower ones measure the other
    # processes on a shared machine, not the code.
    return min(samples)


def row(name, mixrt_us, torch_us):
    ratio = f"{torch_us / mixrt_us:5.2f}x" if torch_us else "   -"
    peer = f"{torch_us:10.2f}" if torch_us else "         -"
    print(f"{name:44s} {mixrt_us:10.2f} {peer}   {ratio}")


def small_op(lib):
    if lib == "mixrt":
        a, b = mixrt.randn(64), mixrt.randn(64)
    else:
        a, b = torch.randn(64), torch.randn(64)
    return per_call_us(lambda: a + b, 20000)


def mixrt_mlp_step(width, batch, compiled):
    mixrt.manual_seed(0)
    model = mnn.Sequential(mnn.Linear(width, width), mnn.ReLU(),
                           mnn.Linear(width, width), mnn.ReLU(),
                           mnn.Linear(width, width))
    opt = mixrt.optim.SGD(model.parameters(), lr=0.01)
    x, y = mixrt.randn(batch, width), mixrt.randn(batch, width)

    def loss_fn(x, y):
        return MF.mse_loss(model(x), y)

    f = mixrt.compile(loss_fn, mode="reduce-overhead") if compiled \
        else loss_fn

    def step():
        opt.zero_grad()
        loss = f(x, y)
        loss.backward()
        opt.step()
        loss.item()
    return step


def torch_mlp_step(width, batch):
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, width))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, width), torch.randn(batch, width)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    return step


def tiny_mlp(lib, compiled):
    step = (mixrt_mlp_step(64, 32, compiled) if lib == "mixrt"
            else torch_mlp_step(64, 32))
    return per_call_us(step, 300)


def amp_recipe(width, batch, lib):
    def mixrt_step():
        mixrt.manual_seed(0)
        layers = []
        for i in range(3):
            layers.append(mnn.Linear(width, width))
            if i < 2:
                layers.append(mnn.ReLU())
        model = mnn.Sequential(*layers)
        opt = mixrt.optim.SGD(model.parameters(), lr=0.001)
        scaler = mixrt.amp.GradScaler()
        x, y = mixrt.randn(batch, width), mixrt.randn(batch, width)

        def step():
            with mixrt.autocast("cpu"):
                loss = MF.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            loss.item()
        return step

    def torch_step():
        torch.manual_seed(0)
        nn = torch.nn
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, width))
        opt = torch.optim.SGD(model.parameters(), lr=0.001)
        scaler = torch.amp.GradScaler("cpu")
        x, y = torch.randn(batch, width), torch.randn(batch, width)

        def step():
            with torch.autocast("cpu", dtype=torch.float32, enabled=False):
                loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            loss.item()
        return step

    step = mixrt_step() if lib == "mixrt" else torch_step()
    return per_call_us(step, 3, repeats=3) / 1000


def child(lib, args):
    """Times every case with one library; prints JSON."""
    global mixrt, torch, mnn, MF
    if lib == "mixrt":
        import mixrt as m
        from mixrt import nn
        from mixrt.nn import functional
        mixrt, mnn, MF = m, nn, functional
        version = f"mixrt {mixrt.__version__} on {mixrt.backends.current()}"
    else:
        import torch as t
        torch = t
        torch.set_num_threads(2)
        version = f"torch {torch.__version__}"
    out = {"version": version,
           "add": small_op(lib),
           "mlp_eager": tiny_mlp(lib, False),
           "amp": amp_recipe(args.recipe_width, args.recipe_batch, lib)}
    if lib == "mixrt":
        out["mlp_compiled"] = tiny_mlp(lib, True)
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def run_child(lib, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", lib,
           "--recipe_width", str(args.recipe_width),
           "--recipe_batch", str(args.recipe_batch)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        print(f"{lib}: {done.stderr.strip()[-400:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe_width", type=int, default=1024)
    p.add_argument("--recipe_batch", type=int, default=512)
    p.add_argument("--child", choices=["mixrt", "torch"])
    args = p.parse_args()
    if args.child:
        return child(args.child, args)
    m = run_child("mixrt", args)
    t = run_child("torch", args)
    tg = (lambda k: t[k]) if t else (lambda k: None)
    print(f"{m['version']}; peer: {t['version'] if t else 'none'}")
    print(f"{'case':44s} {'mixrt':>10s} {'pytorch':>10s}   ratio")
    row("add, two 64-element f32 tensors (us/call)", m["add"], tg("add"))
    row("tiny MLP train step, eager (us)", m["mlp_eager"], tg("mlp_eager"))
    row("tiny MLP train step, compiled reduce-overhead", m["mlp_compiled"],
        tg("mlp_eager"))
    print(f"{'  compiled vs mixrt eager':44s} "
          f"{m['mlp_eager'] / m['mlp_compiled']:10.2f}x")
    row(f"AMP recipe {args.recipe_width}x{args.recipe_batch} step (ms)",
        m["amp"], tg("amp"))
    print(f"peak resident memory: mixrt {m['peak_mib']:.0f} MiB"
          + (f", torch {t['peak_mib']:.0f} MiB" if t else ""))


if __name__ == "__main__":
    main()
