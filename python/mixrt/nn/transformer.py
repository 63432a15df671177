"""MultiheadAttention, TransformerBlock and GPT: the core's modules (fused
SDPA, pre-norm blocks, a GPT-2-shaped model) as mixrt.nn Modules. Their
parameters are the core's tensors, registered here by name, so
parameters(), state_dict(), optimizers and compile see them as any
module's."""

from .. import _mixrt
from .module import Module


class _CoreModule(Module):
    def __init__(self, impl):
        super().__init__()
        object.__setattr__(self, "_impl", impl)
        for name, p in impl.named_parameters():
            # The core's own tensor (not a detached copy): its gradients
            # accumulate where the optimizer reads them.
            p._is_parameter = True
            self._register_nested("_parameters", name, p)
        for name, b in impl.named_buffers():
            self._register_nested("_buffers", name, b)

    def _register_nested(self, table, dotted, tensor):
        # "blocks.0.attn.in_proj_weight" -> submodules as plain holders, so
        # the names match the core's (and PyTorch's) state_dict keys.
        owner = self
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = owner._modules.get(part)
            if child is None:
                child = Module()
                owner._modules[part] = child
            owner = child
        getattr(owner, table)[parts[-1]] = tensor

    def train(self, mode=True):
        super().train(mode)
        self._impl.train(mode)
        return self

    def forward(self, x):
        return self._impl.forward(x)


class MultiheadAttention(_CoreModule):
    """Self-attention (query = key = value) as torch.nn.MultiheadAttention;
    returns (output, None) as need_weights=False does."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True,
                 batch_first=False, is_causal=False):
        if not bias:
            raise ValueError("MultiheadAttention: bias=False is not "
                             "supported yet")
        super().__init__(_mixrt._multihead_attention(
            int(embed_dim), int(num_heads), float(dropout), bool(is_causal)))
        object.__setattr__(self, "batch_first", batch_first)

    def forward(self, query, key=None, value=None, need_weights=False):
        if (key is not None and key is not query) or (
                value is not None and value is not query):
            raise NotImplementedError(
                "MultiheadAttention: only self-attention (key and value the "
                "query itself) is supported yet")
        if need_weights:
            raise NotImplementedError(
                "MultiheadAttention: need_weights=True is not supported")
        x = query if self.batch_first else query.transpose(0, 1)
        out = self._impl.forward(x)
        return (out if self.batch_first else out.transpose(0, 1)), None


class TransformerBlock(_CoreModule):
    """A pre-norm GPT block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, width=384, heads=6, mlp_ratio=4, dropout=0.0,
                 causal=True):
        super().__init__(_mixrt._transformer_block(
            int(width), int(heads), int(mlp_ratio), float(dropout),
            bool(causal)))


class GPT(_CoreModule):
    """tokens [B, T] (int64) -> logits [B, T, vocab_size]."""

    def __init__(self, vocab_size=96, context=256, width=384, heads=6,
                 layers=6, dropout=0.0, checkpoint=False):
        super().__init__(_mixrt._gpt(int(vocab_size), int(context),
                                     int(width), int(heads), int(layers),
                                     float(dropout), bool(checkpoint)))
