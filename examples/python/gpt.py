"""A small GPT trained on text in Python: Debian's fortunes, one character
per token, the core's GPT module (fused attention), AdamW, bfloat16
autocast; prints the loss as it falls and a greedy sample.
(examples/gpt.cc is the C++ twin.)

    python examples/python/gpt.py [--steps 200 --width 128 --layers 2]
"""

import argparse
import glob
import random
import time

import mixrt
from mixrt import nn
from mixrt.nn import functional as F

FIRST, LAST = 32, 126  # Printable ASCII, plus newline as token 0.


def encode(text):
    return [0 if c == "\n" else ord(c) - FIRST + 1 for c in text
            if c == "\n" or FIRST <= ord(c) <= LAST]


def decode(tokens):
    return "".join("\n" if t == 0 else chr(t + FIRST - 1) for t in tokens)


def load_text(pattern, limit):
    text = []
    for path in sorted(glob.glob(pattern)):
        if "." in path.rsplit("/", 1)[-1]:
            continue  # .dat indexes and .u8 links
        with open(path, encoding="utf-8", errors="ignore") as f:
            text.append(f.read())
        if sum(map(len, text)) > limit:
            break
    return encode("".join(text)[:limit])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--text", default="/usr/share/games/fortunes/*")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    data = load_text(args.text, 2_000_000)
    vocab = LAST - FIRST + 2
    print(f"{len(data)} characters, vocabulary {vocab}; "
          f"backend {mixrt.backends.current()}")
    mixrt.manual_seed(args.seed)
    model = nn.GPT(vocab_size=vocab, context=args.context, width=args.width,
                   heads=args.heads, layers=args.layers)
    opt = mixrt.optim.AdamW(model.parameters(), lr=args.lr)
    rng = random.Random(args.seed)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        starts = [rng.randrange(len(data) - args.context - 1)
                  for _ in range(args.batch)]
        x = mixrt.tensor([data[s:s + args.context] for s in starts])
        y = mixrt.tensor([data[s + 1:s + args.context + 1] for s in starts])
        with mixrt.autocast("cpu", dtype=mixrt.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 1 or step % max(1, args.steps // 10) == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}  "
                  f"{(time.perf_counter() - start) / step * 1000:7.1f} "
                  f"ms/step")
    model.eval()
    tokens = encode("The ")
    with mixrt.no_grad():
        for _ in range(120):
            window = tokens[-args.context:]
            logits = model(mixrt.tensor([window]))[0, len(window) - 1]
            row = logits.to(mixrt.float32).tolist()
            tokens.append(max(range(vocab), key=row.__getitem__))
    print("sample:", decode(tokens))


if __name__ == "__main__":
    main()
