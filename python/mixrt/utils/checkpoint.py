"""mixrt.utils.checkpoint: torch.utils.checkpoint.checkpoint over the
core's (the forward's activations are dropped and recomputed in the
backward, with the RNG state restored). use_reentrant=False (the default,
PyTorch's recommendation) lets parameters inside get gradients even when
no argument requires grad; True keeps the reentrant rule (and its
warning)."""

from .. import _mixrt
from .._mixrt import Tensor


def checkpoint(function, *args, use_reentrant=False, preserve_rng_state=True,
               **kwargs):
    if kwargs:
        raise TypeError("checkpoint: keyword arguments are not supported")
    for a in args:
        if not isinstance(a, Tensor):
            raise TypeError("checkpoint: every argument must be a Tensor")
    single = []

    def call(*inputs):
        out = function(*inputs)
        single.append(isinstance(out, Tensor))
        return out

    outs = _mixrt.checkpoint(call, list(args), bool(preserve_rng_state),
                             bool(use_reentrant))
    return outs[0] if single and single[0] else tuple(outs)
