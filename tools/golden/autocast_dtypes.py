#!/usr/bin/env python3
"""Records the output dtype of every op mixrt shares with PyTorch, run under
torch.autocast("cpu") in bf16 and f16 with f32, bf16 and f16 inputs.

Run by hand, never in CI (it needs PyTorch, ~6 GB):
    python3 -m venv v && v/bin/pip install torch
    v/bin/python tools/golden/autocast_dtypes.py > tests/amp/golden/autocast_cpu_dtypes.tsv

tests/amp/autocast_golden_test.cc runs the same calls in mixrt and requires
the same output dtype on every row. The op names are mixrt's function names;
each call's inputs (shapes, targets) are the ones the test builds.
"""
import sys

import torch
import torch.nn.functional as F

NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def floats(dtype, *shape, low=-1.0, high=1.0):
    return (torch.rand(*shape) * (high - low) + low).to(dtype)


# name -> function of the input dtype giving the op's output. Every floating
# input has the row's input dtype, as a model whose weights and activations
# share one dtype has.
OPS = {
    "add": lambda d: torch.add(floats(d, 4, 3), floats(d, 4, 3)),
    "sub": lambda d: torch.sub(floats(d, 4, 3), floats(d, 4, 3)),
    "mul": lambda d: torch.mul(floats(d, 4, 3), floats(d, 4, 3)),
    "div": lambda d: torch.div(floats(d, 4, 3), floats(d, 4, 3, low=1, high=2)),
    "neg": lambda d: torch.neg(floats(d, 4, 3)),
    "relu": lambda d: F.relu(floats(d, 4, 3)),
    "leaky_relu": lambda d: F.leaky_relu(floats(d, 4, 3), 0.1),
    "gelu": lambda d: F.gelu(floats(d, 4, 3)),
    "silu": lambda d: F.silu(floats(d, 4, 3)),
    "sigmoid": lambda d: torch.sigmoid(floats(d, 4, 3)),
    "tanh": lambda d: torch.tanh(floats(d, 4, 3)),
    "exp": lambda d: torch.exp(floats(d, 4, 3)),
    "log": lambda d: torch.log(floats(d, 4, 3, low=1, high=2)),
    "sqrt": lambda d: torch.sqrt(floats(d, 4, 3, low=1, high=2)),
    "pow": lambda d: torch.pow(floats(d, 4, 3), 2.0),
    "clamp": lambda d: torch.clamp(floats(d, 4, 3), -0.5, 0.5),
    "sum": lambda d: torch.sum(floats(d, 4, 3)),
    "mean": lambda d: torch.mean(floats(d, 4, 3)),
    "matmul": lambda d: torch.matmul(floats(d, 4, 3), floats(d, 3, 5)),
    "linear": lambda d: F.linear(floats(d, 4, 3), floats(d, 5, 3), floats(d, 5)),
    "softmax": lambda d: F.softmax(floats(d, 4, 3), dim=1),
    "log_softmax": lambda d: F.log_softmax(floats(d, 4, 3), dim=1),
    "layer_norm": lambda d: F.layer_norm(floats(d, 4, 3), (3,), floats(d, 3),
                                         floats(d, 3)),
    "embedding": lambda d: F.embedding(torch.tensor([0, 2, 1]), floats(d, 3, 4)),
    "conv2d": lambda d: F.conv2d(floats(d, 1, 2, 5, 5), floats(d, 3, 2, 3, 3),
                                 floats(d, 3)),
    "cat": lambda d: torch.cat([floats(d, 4, 3), floats(d, 4, 3)], 0),
    "stack": lambda d: torch.stack([floats(d, 4, 3), floats(d, 4, 3)], 0),
    "scaled_dot_product_attention": lambda d: F.scaled_dot_product_attention(
        floats(d, 2, 4, 3), floats(d, 2, 5, 3), floats(d, 2, 5, 3)),
    "max_pool2d": lambda d: F.max_pool2d(floats(d, 1, 2, 4, 4), 2),
    "avg_pool2d": lambda d: F.avg_pool2d(floats(d, 1, 2, 4, 4), 2),
    "cross_entropy": lambda d: F.cross_entropy(floats(d, 4, 3),
                                               torch.tensor([0, 2, 1, 0])),
    "nll_loss": lambda d: F.nll_loss(floats(d, 4, 3), torch.tensor([0, 2, 1, 0])),
    "mse_loss": lambda d: F.mse_loss(floats(d, 4, 3), floats(d, 4, 3)),
    "l1_loss": lambda d: F.l1_loss(floats(d, 4, 3), floats(d, 4, 3)),
    "smooth_l1_loss": lambda d: F.smooth_l1_loss(floats(d, 4, 3), floats(d, 4, 3)),
    "binary_cross_entropy_with_logits":
        lambda d: F.binary_cross_entropy_with_logits(floats(d, 4, 3),
                                                     floats(d, 4, 3, low=0)),
    "binary_cross_entropy":
        lambda d: F.binary_cross_entropy(floats(d, 4, 3, low=0.1, high=0.9),
                                         floats(d, 4, 3, low=0)),
}


def main():
    torch.manual_seed(0)
    out = sys.stdout
    out.write(f"# torch {torch.__version__}: output dtype under "
              "torch.autocast('cpu'); written by tools/golden/autocast_dtypes.py\n")
    out.write("op\tautocast_dtype\tinput_dtype\toutput_dtype\n")
    for name, fn in OPS.items():
        for autocast_dtype in (torch.bfloat16, torch.float16):
            for input_dtype in (torch.float32, torch.bfloat16, torch.float16):
                with torch.autocast("cpu", dtype=autocast_dtype):
                    try:
                        result = NAMES[fn(input_dtype).dtype]
                    except RuntimeError as e:  # not implemented for that dtype
                        result = "error"
                        print(f"{name} {input_dtype}: {e}", file=sys.stderr)
                out.write(f"{name}\t{NAMES[autocast_dtype]}\t"
                          f"{NAMES[input_dtype]}\t{result}\n")


if __name__ == "__main__":
    main()
