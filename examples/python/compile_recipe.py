"""mixrt.compile in Python: a module written in Python, compiled with
"reduce-overhead", trained for a few steps beside the same module run
eagerly; prints each one's time per step and that their losses agree.

    python examples/python/compile_recipe.py [--width 64 --batch 32]
"""

import argparse
import time

import mixrt
from mixrt import nn
from mixrt.nn import functional as F


class MLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width)
                                      for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return x


def train(compiled, args):
    mixrt.manual_seed(0)
    model = MLP(args.width, args.depth)
    opt = mixrt.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = mixrt.randn(args.batch, args.width), mixrt.randn(args.batch,
                                                            args.width)

    def loss_fn(x, y):
        return F.mse_loss(model(x), y)

    step = mixrt.compile(loss_fn, mode="reduce-overhead") if compiled \
        else loss_fn
    losses, start = [], None
    for i in range(args.steps):
        if i == 3:  # Traced and checked by then.
            start = time.perf_counter()
        opt.zero_grad()
        loss = step(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    per_step = (time.perf_counter() - start) / (args.steps - 3)
    return per_step * 1e6, losses


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    eager_us, eager_losses = train(False, args)
    compiled_us, compiled_losses = train(True, args)
    worst = max(abs(a - b) / max(abs(a), 1e-12)
                for a, b in zip(eager_losses, compiled_losses))
    print(f"eager      {eager_us:8.1f} us/step")
    print(f"compiled   {compiled_us:8.1f} us/step "
          f"({eager_us / compiled_us:.2f}x eager)")
    print(f"losses agree within {worst:.2e} relative "
          f"(first {eager_losses[0]:.6f}, last {eager_losses[-1]:.6f})")


if __name__ == "__main__":
    main()
