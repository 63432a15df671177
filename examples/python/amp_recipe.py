"""PyTorch's AMP recipe in mixrt's Python: an MLP of Linear + ReLU layers
trained with MSE and SGD, in default precision, with autocast, and with
autocast + GradScaler; prints the time per step of each (after a first
step that warms up) and the final loss.

    python examples/python/amp_recipe.py [--width 4096 --batch 512 ...]

The same five lines as torch's recipe:

    with mixrt.autocast(device_type="cpu"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""

import argparse
import time

import mixrt
from mixrt import nn


def make_model(width, layers):
    mods = []
    for _ in range(layers - 1):
        mods += [nn.Linear(width, width), nn.ReLU()]
    mods.append(nn.Linear(width, width))
    return nn.Sequential(*mods)


def train(mode, args, data, targets):
    mixrt.manual_seed(0)  # The same initial weights in every mode.
    model = make_model(args.width, args.layers)
    opt = mixrt.optim.SGD(model.parameters(), lr=0.001)
    scaler = mixrt.amp.GradScaler(enabled=(mode == "autocast+scaler"))
    use_autocast = mode != "default"
    dtype = {"bf16": mixrt.bfloat16, "f16": mixrt.float16}.get(args.dtype)

    def loss_of(x, y):
        return nn.functional.mse_loss(model(x), y)

    step_loss = mixrt.compile(loss_of, mode=args.compile) if args.compile \
        else loss_of
    times = []
    for step in range(args.steps):
        x, y = data[step % len(data)], targets[step % len(targets)]
        start = time.perf_counter()
        with mixrt.autocast("cpu", dtype=dtype, enabled=use_autocast):
            loss = step_loss(x, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        final = loss.item()  # Waits for the step, as a .item() does.
        times.append(time.perf_counter() - start)
    steady = times[1:] or times
    return 1000 * sum(steady) / len(steady), final


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batches", type=int, default=2)
    p.add_argument("--dtype", choices=["bf16", "f16"], default=None,
                   help="autocast dtype (default: the device type's)")
    p.add_argument("--compile", default="",
                   help="compile mode for the forward and loss "
                        "(default, reduce-overhead, ...); empty: eager")
    args = p.parse_args()
    print(f"backend: {mixrt.backends.current()}")
    mixrt.manual_seed(1)
    data = [mixrt.randn(args.batch, args.width) for _ in range(args.batches)]
    targets = [mixrt.randn(args.batch, args.width)
               for _ in range(args.batches)]
    for mode in ("default", "autocast", "autocast+scaler"):
        ms, loss = train(mode, args, data, targets)
        print(f"{mode:16s} {ms:9.2f} ms/step   final loss {loss:.6f}")


if __name__ == "__main__":
    main()
