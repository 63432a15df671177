"""mixrt.optim: SGD and AdamW (the core's fused steps) with torch.optim's
constructor arguments, and their schedulers in mixrt.optim.lr_scheduler."""

import types

from . import _mixrt
from ._mixrt import Tensor


def _param_list(params):
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    for p in params:
        if isinstance(p, dict):
            raise TypeError(
                "parameter groups (dicts) are not supported yet: pass the "
                "parameters themselves")
        if not isinstance(p, Tensor):
            raise TypeError(
                f"optimizer can only optimize Tensors, but one of the params "
                f"is {type(p).__name__}")
    return params


class _Group(dict):
    """param_groups[0]: setting "lr" sets the optimizer's (as a scheduler
    written for torch does)."""

    def __init__(self, optimizer, **values):
        super().__init__(**values)
        self._optimizer = optimizer

    def __setitem__(self, key, value):
        if key == "lr":
            self._optimizer._impl.lr = float(value)
        super().__setitem__(key, value)


class Optimizer:
    def __init__(self, impl, params, defaults):
        self._impl = impl
        self.defaults = defaults
        self.param_groups = [_Group(self, params=params, **defaults)]

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _mixrt._EnableGrad():
                loss = closure()
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none=True):
        self._impl.zero_grad(set_to_none)


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0,
                 weight_decay=0, nesterov=False):
        if dampening != 0:
            raise ValueError("SGD: dampening is not supported yet (0 only)")
        params = _param_list(params)
        impl = _mixrt.SGD._create(params, float(lr), float(momentum),
                                  float(weight_decay), bool(nesterov))
        super().__init__(impl, params, dict(
            lr=lr, momentum=momentum, dampening=dampening,
            weight_decay=weight_decay, nesterov=nesterov))


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, amsgrad=False):
        if amsgrad:
            raise ValueError("AdamW: amsgrad is not supported yet")
        params = _param_list(params)
        impl = _mixrt.AdamW._create(params, float(lr), float(betas[0]),
                                    float(betas[1]), float(eps),
                                    float(weight_decay))
        super().__init__(impl, params, dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            amsgrad=amsgrad))


class _Scheduler:
    def __init__(self, optimizer, impl):
        self.optimizer = optimizer
        self._impl = impl

    def step(self):
        self._impl.step()
        self.optimizer.param_groups[0]["lr"] = self.optimizer._impl.lr

    def get_last_lr(self):
        return [self.optimizer._impl.lr]


class StepLR(_Scheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        super().__init__(optimizer, _mixrt.StepLR._create(
            optimizer._impl, int(step_size), float(gamma)))


class CosineAnnealingLR(_Scheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):  # noqa: N803
        super().__init__(optimizer, _mixrt.CosineAnnealingLR._create(
            optimizer._impl, int(T_max), float(eta_min)))


lr_scheduler = types.SimpleNamespace(StepLR=StepLR,
                                     CosineAnnealingLR=CosineAnnealingLR)
