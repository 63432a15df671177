"""mixrt.nn: Module (subclassable in Python) and the layers, with
torch.nn's constructor arguments and initialization."""

from . import functional
from .module import Module, Parameter
from .layers import (
    BatchNorm2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    GELU,
    LayerNorm,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
    SiLU,
    Sigmoid,
    Tanh,
)
from .transformer import GPT, MultiheadAttention, TransformerBlock
from . import utils

__all__ = [
    "Module", "Parameter", "functional", "Linear", "Conv2d", "BatchNorm2d",
    "LayerNorm", "Embedding", "Dropout", "ReLU", "GELU", "SiLU", "Sigmoid",
    "Tanh", "Flatten", "MaxPool2d", "Sequential", "MultiheadAttention",
    "TransformerBlock", "GPT", "utils",
]
