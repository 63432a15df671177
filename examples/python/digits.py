"""A real data set in Python: scikit-learn's handwritten digits (8x8
images, 10 classes), an MLP trained three ways from the same seed — float32,
bfloat16 autocast, float16 autocast + GradScaler — with the test accuracy
and time of each. AMP should match float32's accuracy within about a point
(examples/digits.cc is the C++ twin, with --check).

    python examples/python/digits.py [--epochs 40]
"""

import argparse
import csv
import gzip
import random
import time

import mixrt
from mixrt import nn
from mixrt.nn import functional as F

DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load(path):
    with gzip.open(path, "rt") as f:
        rows = [[float(v) for v in row] for row in csv.reader(f) if row]
    return [r[:-1] for r in rows], [int(r[-1]) for r in rows]


def batches(xs, ys, size, rng):
    order = list(range(len(xs)))
    rng.shuffle(order)
    for i in range(0, len(order), size):
        idx = order[i:i + size]
        yield (mixrt.tensor([[v / 16.0 for v in xs[j]] for j in idx]),
               mixrt.tensor([ys[j] for j in idx]))


def accuracy(model, xs, ys):
    model.eval()
    with mixrt.no_grad():
        logits = model(mixrt.tensor([[v / 16.0 for v in x] for x in xs]))
        pred = logits.tolist()
    model.train()
    right = sum(int(max(range(10), key=row.__getitem__) == y)
                for row, y in zip(pred, ys))
    return 100.0 * right / len(ys)


def train(mode, args, split):
    train_x, train_y, test_x, test_y = split
    mixrt.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = mixrt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    dtype = {"bf16 autocast": mixrt.bfloat16,
             "f16 autocast + scaler": mixrt.float16}.get(mode)
    scaler = mixrt.amp.GradScaler(enabled=mode == "f16 autocast + scaler")
    rng = random.Random(args.seed)
    start = time.perf_counter()
    for _ in range(args.epochs):
        for x, y in batches(train_x, train_y, args.batch, rng):
            with mixrt.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    seconds = time.perf_counter() - start
    return accuracy(model, test_x, test_y), seconds


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=DATA)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    xs, ys = load(args.data)
    order = list(range(len(xs)))
    random.Random(args.seed).shuffle(order)
    cut = len(order) * 4 // 5
    split = ([xs[i] for i in order[:cut]], [ys[i] for i in order[:cut]],
             [xs[i] for i in order[cut:]], [ys[i] for i in order[cut:]])
    print(f"digits: {cut} train, {len(xs) - cut} test; "
          f"backend {mixrt.backends.current()}")
    for mode in ("f32", "bf16 autocast", "f16 autocast + scaler"):
        acc, seconds = train(mode, args, split)
        print(f"{mode:22s} test accuracy {acc:6.2f}%   {seconds:6.2f} s")


if __name__ == "__main__":
    main()
