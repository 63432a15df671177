"""mixrt.nn.utils: gradient clipping (one multi-tensor norm launch)."""

from .. import _mixrt


def clip_grad_norm_(parameters, max_norm, norm_type=2.0,
                    error_if_nonfinite=False):
    """torch.nn.utils.clip_grad_norm_: norm_type any positive order or
    float('inf') / 'inf'; a non-finite total norm raises RuntimeError with
    error_if_nonfinite, else it is returned and applied as PyTorch does."""
    params = [p for p in parameters if p.grad is not None]
    return _mixrt.clip_grad_norm_(params, float(max_norm), float(norm_type),
                                  bool(error_if_nonfinite))
