"""mixrt.nn.functional: torch.nn.functional's signatures over the core's
differentiable ops (one core call each)."""

import numbers

from .. import _mixrt


def _pair(v):
    if isinstance(v, numbers.Integral):
        return [int(v), int(v)]
    v = list(v)
    if len(v) != 2:
        raise ValueError(f"expected an int or a pair of ints, got {v}")
    return [int(x) for x in v]


def linear(input, weight, bias=None):
    return _mixrt.linear(input, weight, bias)


def relu(input, inplace=False):
    return _mixrt.relu(input)


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(
            f"approximate argument must be either none or tanh, got "
            f"{approximate!r}")
    return _mixrt.gelu(input, approximate == "tanh")


def silu(input, inplace=False):
    return _mixrt.silu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _mixrt.leaky_relu(input, float(negative_slope))


def sigmoid(input):
    return _mixrt.sigmoid(input)


def tanh(input):
    return _mixrt.tanh(input)


def softmax(input, dim):
    return _mixrt.softmax(input, dim)


def log_softmax(input, dim):
    return _mixrt.log_softmax(input, dim)


def dropout(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError(
            f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    return _mixrt.dropout(input, float(p))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if tuple(input.shape[len(input.shape) - len(normalized_shape):]) != \
            normalized_shape:
        raise ValueError(
            f"layer_norm: input shape {tuple(input.shape)} does not end "
            f"with normalized_shape {normalized_shape}")
    return _mixrt.layer_norm(input, len(normalized_shape), weight, bias,
                             float(eps))


def embedding(input, weight, padding_idx=None):
    return _mixrt.embedding(weight, input, padding_idx)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1,
           groups=1):
    return _mixrt.conv2d(input, weight, bias, _pair(stride), _pair(padding),
                         _pair(dilation), int(groups))


def max_pool2d(input, kernel_size, stride=None, padding=0):
    stride = kernel_size if stride is None else stride
    return _mixrt.pool2d(input, True, _pair(kernel_size), _pair(stride),
                         _pair(padding))


def avg_pool2d(input, kernel_size, stride=None, padding=0):
    stride = kernel_size if stride is None else stride
    return _mixrt.pool2d(input, False, _pair(kernel_size), _pair(stride),
                         _pair(padding))


def batch_norm(input, running_mean, running_var, weight=None, bias=None,
               training=False, momentum=0.1, eps=1e-5):
    return _mixrt.batch_norm(input, running_mean, running_var, weight, bias,
                             bool(training), float(momentum), float(eps))


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return _mixrt.scaled_dot_product_attention(
        query, key, value, attn_mask, float(dropout_p), bool(is_causal),
        None if scale is None else float(scale), bool(enable_gqa))


def mse_loss(input, target, reduction="mean"):
    return _mixrt.mse_loss(input, target, reduction)


def l1_loss(input, target, reduction="mean"):
    return _mixrt.l1_loss(input, target, reduction)


def cross_entropy(input, target, weight=None, ignore_index=-100,
                  reduction="mean", label_smoothing=0.0):
    """F.cross_entropy: class indices or class probabilities (a floating
    target of the input's shape), [N, C] or [N, C, d...] inputs, class
    weights, ignore_index and label smoothing, as PyTorch."""
    return _mixrt.cross_entropy(input, target, int(ignore_index), reduction,
                                float(label_smoothing), weight)


def nll_loss(input, target, ignore_index=-100, reduction="mean"):
    return _mixrt.nll_loss(input, target, int(ignore_index), reduction)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    return _mixrt.smooth_l1_loss(input, target, reduction, float(beta))


def binary_cross_entropy(input, target, reduction="mean"):
    return _mixrt.binary_cross_entropy(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, reduction="mean"):
    return _mixrt.binary_cross_entropy_with_logits(input, target, reduction)
