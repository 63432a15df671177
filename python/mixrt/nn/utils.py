"""mixrt.nn.utils: gradient clipping (one multi-tensor norm launch)."""

from .. import _mixrt


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    if float(norm_type) != 2.0:
        raise ValueError("clip_grad_norm_: only norm_type=2 is supported yet")
    params = [p for p in parameters if p.grad is not None]
    return _mixrt.clip_grad_norm_(params, float(max_norm))
