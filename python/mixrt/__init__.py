"""mixrt: a mixed-precision ML runtime with swappable hardware backends.

The Python face of mixrt's C++ core, shaped as PyTorch's: tensors with
autograd, autocast and GradScaler (PyTorch AMP's semantics), nn, optim and
compile. Every op runs in the core, on the backend the registry chose
(``mixrt.backends.info()`` says which and why).
"""

from . import _mixrt
from ._mixrt import Tensor, dtype
from ._tensor import (
    arange,
    enable_grad,
    from_dlpack,
    from_numpy,
    full,
    inference_mode,
    is_grad_enabled,
    manual_seed,
    no_grad,
    ones,
    rand,
    randn,
    tensor,
    zeros,
)
from ._autocast import autocast, is_autocast_enabled, get_autocast_dtype
from ._compile import compile  # noqa: A001 (torch.compile's name)
from ._io import load, save
from . import amp, backends, distributed, nn, optim, utils  # noqa: E402
from ._ops import cat, matmul, stack  # noqa: E402

float32 = dtype.float32
float16 = dtype.float16
bfloat16 = dtype.bfloat16
int32 = dtype.int32
int64 = dtype.int64
bool = dtype.bool  # noqa: A001 (torch.bool's name)
float = float32  # noqa: A001
half = float16
long = int64

__version__ = "0.1.0"

__all__ = [
    "Tensor", "dtype", "tensor", "zeros", "ones", "full", "rand", "randn",
    "arange", "from_dlpack", "from_numpy", "manual_seed", "no_grad",
    "enable_grad", "inference_mode", "is_grad_enabled", "autocast",
    "is_autocast_enabled", "get_autocast_dtype", "compile", "save", "load",
    "amp", "backends", "distributed", "nn", "optim", "utils", "cat", "stack", "matmul",
    "float32", "float16", "bfloat16", "int32", "int64", "bool",
]
