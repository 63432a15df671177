"""The GPT of examples/gpt.cc (mixrt::nn::GPT) in PyTorch eager on the CPU:
token + position embeddings, pre-LayerNorm blocks (fused-QKV attention
through F.scaled_dot_product_attention, 4x GELU MLP, dropout), final
LayerNorm, tied output projection; AdamW (lr 1e-3, weight decay 0.01),
gradient clipping at 1.0. Trains f32, bf16 autocast and f16 autocast +
GradScaler, each with and without per-block checkpointing, on random
tokens (speed does not depend on the text); prints the median step time
after the first, as examples/gpt.cc does, and the process's peak RSS.

  python pytorch_gpt.py --steps 6 --layers 6 --width 384 --heads 6 \
      --context 256 --batch 16 --vocab 114
"""
import argparse
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Attention(nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.in_proj = nn.Linear(width, 3 * width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, e = x.shape
        qkv = self.in_proj(x).view(b, t, 3, self.heads, e // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True,
            dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, e))


class Block(nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads, dropout)
        self.fc, self.proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln_1(x)))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab, context, width, heads, layers, dropout, ckpt):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln_f, self.drop, self.ckpt = nn.LayerNorm(width), nn.Dropout(dropout), ckpt

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.drop(self.wte(tokens) + self.wpe(torch.arange(t)))
        for block in self.h:
            h = checkpoint(block, h, use_reentrant=False) if self.ckpt else block(h)
        return F.linear(self.ln_f(h), self.wte.weight)


def train(a, dtype, ckpt):
    torch.manual_seed(1234)
    model = GPT(a.vocab, a.context, a.width, a.heads, a.layers, a.dropout, ckpt)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cpu", enabled=dtype == torch.float16)
    x = torch.randint(0, a.vocab, (a.batch, a.context))
    y = torch.randint(0, a.vocab, (a.batch * a.context,))
    times = []
    for step in range(a.steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16,
                            enabled=dtype is not None):
            loss = F.cross_entropy(model(x).view(-1, a.vocab).float(), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        loss.item()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:] if len(times) > 1 else times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--vocab", type=int, default=114)
    p.add_argument("--modes", default="f32,bf16,f16")
    p.add_argument("--checkpointing", default="both")
    p.add_argument("--threads", type=int, default=2)
    a, _ = p.parse_known_args()
    torch.set_num_threads(a.threads)
    dtypes = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}
    ckpts = {"off": [False], "on": [True], "both": [False, True]}[a.checkpointing]
    print(f"PyTorch {torch.__version__} eager GPT, {a.threads} threads: "
          f"{a.layers} layers, width {a.width}, {a.heads} heads, context "
          f"{a.context}, batch {a.batch}; median step after the first of {a.steps}")
    print(f"{'mode':<18} {'tokens/s':>10} {'ms/step':>9}")
    base = None
    for m in a.modes.split(","):
        for ckpt in ckpts:
            name = m + (" + scaler" if m == "f16" else "") + (" + ckpt" if ckpt else "")
            s = train(a, dtypes[m], ckpt)
            base = base or s
            print(f"{name:<18} {a.batch * a.context / s:>10.0f} {1000 * s:>9.1f}"
                  f"   {base / s:.2f}x speed vs the first mode", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process (every mode): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
