"""mixrt.amp: GradScaler with torch.amp.GradScaler's methods and errors
(the core's, which follow PyTorch's state machine), and autocast."""

from . import _mixrt
from ._autocast import autocast  # noqa: F401 (torch.amp.autocast)


class GradScaler:
    def __init__(self, device="cpu", init_scale=2.0**16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self.device = device
        self._impl = _mixrt.GradScaler(
            init_scale=float(init_scale), growth_factor=float(growth_factor),
            backoff_factor=float(backoff_factor),
            growth_interval=int(growth_interval), enabled=bool(enabled))

    def scale(self, outputs):
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self._impl.scale(o) for o in outputs)
        return self._impl.scale(outputs)

    def unscale_(self, optimizer):
        self._impl.unscale_(optimizer._impl)

    def step(self, optimizer, *args, **kwargs):
        if args or kwargs:
            raise TypeError("GradScaler.step: closures are not supported")
        self._impl.step(optimizer._impl)

    def update(self, new_scale=None):
        if new_scale is not None and not isinstance(new_scale, float):
            if hasattr(new_scale, "item"):
                new_scale = new_scale.item()
            else:
                raise TypeError("new_scale should be a float or a 1-element "
                                "tensor")
        self._impl.update(new_scale)

    def get_scale(self):
        return self._impl.get_scale()

    def is_enabled(self):
        return self._impl.is_enabled()

    def get_growth_factor(self):
        return self._impl.get_growth_factor()

    def set_growth_factor(self, new_factor):
        self._impl.set_growth_factor(float(new_factor))

    def get_backoff_factor(self):
        return self._impl.get_backoff_factor()

    def set_backoff_factor(self, new_factor):
        self._impl.set_backoff_factor(float(new_factor))

    def get_growth_interval(self):
        return self._impl.get_growth_interval()

    def set_growth_interval(self, new_interval):
        self._impl.set_growth_interval(int(new_interval))

    def last_step_skipped(self):
        """Whether the last step() skipped the optimizer (an inf or NaN
        gradient): what pytorch#152279 asks of PyTorch's."""
        return self._impl.last_step_skipped()

    # PyTorch's GradScaler.state_dict holds these as ints.
    _INT_STATE = ("growth_interval", "_growth_tracker")

    def state_dict(self):
        state = dict(self._impl.state_dict())
        for key in self._INT_STATE:
            if key in state:
                state[key] = int(state[key])
        return state

    def load_state_dict(self, state_dict):
        self._impl.load_state_dict(
            {k: float(v) for k, v in state_dict.items()})
