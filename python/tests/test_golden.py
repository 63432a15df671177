"""The files PyTorch 2.15 itself wrote (tools/golden/*.py, by hand) replayed
through the Python API, as the C++ golden tests replay them through the
core: every op's output dtype under CPU autocast, and GradScaler's scale
(bit for bit), growth tracker and skipped steps over scripted patterns of
finite and non-finite gradients."""

import os
import struct

import pytest

import mixrt
from mixrt.nn import functional as F

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "tests", "amp", "golden")
DTYPES = {"f32": mixrt.float32, "bf16": mixrt.bfloat16, "f16": mixrt.float16}


def rows(name):
    with open(os.path.join(GOLDEN, name)) as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and l[0] != "#"]
    return [l.split("\t") for l in lines[1:]]  # After the header.


def floats(dtype, shape, low=-1.0, high=1.0):
    return (mixrt.rand(*shape) * (high - low) + low).to(dtype)


def unary(fn, low=-1.0, high=1.0):
    return lambda d: fn(floats(d, (4, 3), low, high))


def binary(fn, low_b=-1.0, high_b=1.0):
    return lambda d: fn(floats(d, (4, 3)), floats(d, (4, 3), low_b, high_b))


def classes():
    return mixrt.tensor([0, 2, 1, 0])


OPS = {
    "add": binary(lambda a, b: a + b),
    "sub": binary(lambda a, b: a - b),
    "mul": binary(lambda a, b: a * b),
    "div": binary(lambda a, b: a / b, 1, 2),
    "neg": unary(lambda x: -x),
    "relu": unary(F.relu),
    "leaky_relu": unary(lambda x: F.leaky_relu(x, 0.1)),
    "gelu": unary(F.gelu),
    "silu": unary(F.silu),
    "sigmoid": unary(F.sigmoid),
    "tanh": unary(F.tanh),
    "exp": unary(lambda x: x.exp()),
    "log": unary(lambda x: x.log(), 1, 2),
    "sqrt": unary(lambda x: x.sqrt(), 1, 2),
    "pow": unary(lambda x: x ** 2),
    "clamp": unary(lambda x: x.clamp(-0.5, 0.5)),
    "sum": unary(lambda x: x.sum()),
    "mean": unary(lambda x: x.mean()),
    "softmax": unary(lambda x: F.softmax(x, 1)),
    "log_softmax": unary(lambda x: F.log_softmax(x, 1)),
    "matmul": lambda d: floats(d, (4, 3)) @ floats(d, (3, 5)),
    "linear": lambda d: F.linear(floats(d, (4, 3)), floats(d, (5, 3)),
                                 floats(d, (5,))),
    "layer_norm": lambda d: F.layer_norm(floats(d, (4, 3)), (3,),
                                         floats(d, (3,)), floats(d, (3,))),
    "embedding": lambda d: F.embedding(mixrt.tensor([0, 2, 1]),
                                       floats(d, (3, 4))),
    "conv2d": lambda d: F.conv2d(floats(d, (1, 2, 5, 5)),
                                 floats(d, (3, 2, 3, 3)), floats(d, (3,))),
    "cat": binary(lambda a, b: mixrt.cat([a, b], 0)),
    "stack": binary(lambda a, b: mixrt.stack([a, b], 0)),
    "scaled_dot_product_attention": lambda d: (
        F.scaled_dot_product_attention(floats(d, (2, 4, 3)),
                                       floats(d, (2, 5, 3)),
                                       floats(d, (2, 5, 3)))),
    "max_pool2d": lambda d: F.max_pool2d(floats(d, (1, 2, 4, 4)), 2),
    "avg_pool2d": lambda d: F.avg_pool2d(floats(d, (1, 2, 4, 4)), 2),
    "cross_entropy": lambda d: F.cross_entropy(floats(d, (4, 3)), classes()),
    "nll_loss": lambda d: F.nll_loss(floats(d, (4, 3)), classes()),
    "mse_loss": binary(F.mse_loss),
    "l1_loss": binary(F.l1_loss),
    "smooth_l1_loss": binary(F.smooth_l1_loss),
    "binary_cross_entropy_with_logits": binary(
        F.binary_cross_entropy_with_logits, 0, 1),
    "binary_cross_entropy": lambda d: F.binary_cross_entropy(
        floats(d, (4, 3), 0.1, 0.9), floats(d, (4, 3), 0, 1)),
}


def test_autocast_output_dtypes_match_pytorch_on_every_row():
    golden = rows("autocast_cpu_dtypes.tsv")
    assert len(golden) == 37 * 2 * 3
    mixrt.backends.select("reference")  # As the C++ test: the oracle.
    try:
        for op, autocast_dtype, input_dtype, output_dtype in golden:
            assert op in OPS, f"golden op {op} has no Python call"
            with mixrt.autocast("cpu", dtype=DTYPES[autocast_dtype]):
                if output_dtype == "error":
                    with pytest.raises(Exception):
                        OPS[op](DTYPES[input_dtype])
                    continue
                out = OPS[op](DTYPES[input_dtype])
            assert out.dtype == DTYPES[output_dtype], (
                op, autocast_dtype, input_dtype)
    finally:
        mixrt.backends.select(mixrt.backends.list()[0])


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def test_grad_scaler_trajectories_match_pytorch_bit_for_bit():
    cases = {}
    with open(os.path.join(GOLDEN, "grad_scaler_trajectories.tsv")) as f:
        for line in f:
            if line.startswith("# ") and "\t" in line:
                name, params = line[2:].rstrip("\n").split("\t")
                if name != "case":
                    init, growth, backoff, interval = params.split()
                    cases[name] = dict(init_scale=float(init),
                                       growth_factor=float(growth),
                                       backoff_factor=float(backoff),
                                       growth_interval=int(interval))
    golden = rows("grad_scaler_trajectories.tsv")
    checked = 0
    for name, kwargs in cases.items():
        scaler = mixrt.amp.GradScaler(**kwargs)
        w = mixrt.nn.Parameter(mixrt.ones(4))
        opt = mixrt.optim.SGD([w], lr=0.1)
        steps = [r for r in golden if r[0] == name]
        for _, step, kind, bits, tracker, skipped in steps:
            opt.zero_grad()
            loss = (w * mixrt.arange(4.0)).sum()
            scaler.scale(loss).backward()
            with mixrt.no_grad():
                if kind == "I":
                    w.grad[1].copy_(mixrt.tensor(float("inf")))
                elif kind == "N":
                    w.grad[2].copy_(mixrt.tensor(float("nan")))
            scaler.step(opt)
            scaler.update()
            assert f"{f32_bits(scaler.get_scale()):08x}" == bits, (name, step)
            assert scaler._impl._get_growth_tracker() == int(tracker)
            assert scaler.last_step_skipped() == bool(int(skipped))
            checked += 1
    assert checked == len(golden) > 4000
