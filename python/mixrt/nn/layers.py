"""The layers of torch.nn that mixrt's core has, with torch.nn's
constructor arguments and default initialization (kaiming-uniform bounds
1/sqrt(fan_in) for Linear and Conv2d, N(0, 1) for Embedding)."""

import math
import numbers

from .. import _mixrt
from .._tensor import no_grad
from . import functional as F
from .module import Module, Parameter


def _uniform(shape, bound, dtype):
    with no_grad():
        t = _mixrt.rand(list(shape), _mixrt.dtype.float32) * (2.0 * bound)
        t = t - bound
    return t if dtype in (None, _mixrt.dtype.float32) else t.to(dtype)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(
            _uniform((out_features, in_features), bound, dtype))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound, dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, "
                f"out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1,
                 padding=0, dilation=1, groups=1, bias=True, dtype=None):
        super().__init__()
        k = F._pair(kernel_size)
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be "
                             "divisible by groups")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = tuple(k), F._pair(stride)
        self.padding, self.dilation = F._pair(padding), F._pair(dilation)
        self.groups = groups
        fan_in = in_channels // groups * k[0] * k[1]
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = Parameter(_uniform(
            (out_channels, in_channels // groups, k[0], k[1]), bound, dtype))
        if bias:
            self.bias = Parameter(_uniform((out_channels,), bound, dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride,
                        self.padding, self.dilation, self.groups)


class BatchNorm2d(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        f32 = _mixrt.dtype.float32
        if affine:
            self.weight = Parameter(_mixrt.ones([num_features], f32))
            self.bias = Parameter(_mixrt.zeros([num_features], f32))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean",
                                 _mixrt.zeros([num_features], f32))
            self.register_buffer("running_var",
                                 _mixrt.ones([num_features], f32))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)

    def forward(self, input):
        training = self.training or self.running_mean is None
        return F.batch_norm(input, self.running_mean, self.running_var,
                            self.weight, self.bias, training, self.momentum,
                            self.eps)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True,
                 bias=True):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        f32 = _mixrt.dtype.float32
        if elementwise_affine:
            self.weight = Parameter(
                _mixrt.ones(list(self.normalized_shape), f32))
            if bias:
                self.bias = Parameter(
                    _mixrt.zeros(list(self.normalized_shape), f32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight,
                            self.bias, self.eps)


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        w = _mixrt.randn([num_embeddings, embedding_dim], _mixrt.dtype.float32)
        if padding_idx is not None:
            with no_grad():
                w[padding_idx].copy_(
                    _mixrt.zeros([embedding_dim], _mixrt.dtype.float32))
        self.weight = Parameter(w)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(
                f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, input):
        return F.dropout(input, self.p, self.training)


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.relu(input)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, self.approximate)


class SiLU(Module):
    def forward(self, input):
        return F.silu(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        shape = list(input.shape)
        start = self.start_dim % len(shape)
        end = self.end_dim % len(shape)
        flat = 1
        for s in shape[start:end + 1]:
            flat *= s
        return input.reshape(shape[:start] + [flat] + shape[end + 1:])


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = (kernel_size, stride,
                                                       padding)

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride,
                            self.padding)


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"{type(m).__name__} is not a Module subclass")
            self.register_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*mods[i])
        return mods[i]

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.register_module(str(len(self._modules)), module)
        return self
