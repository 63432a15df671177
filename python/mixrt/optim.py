"""mixrt.optim: SGD and AdamW (the core's fused steps) with torch.optim's
constructor arguments, and their schedulers in mixrt.optim.lr_scheduler."""

import bisect
import types

from . import _mixrt
from ._mixrt import Tensor


_GROUP_KEYS = ("params", "lr", "weight_decay")


def _tensors(params):
    if isinstance(params, Tensor):
        params = [params]
    params = list(params)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(
                f"optimizer can only optimize Tensors, but one of the params "
                f"is {type(p).__name__}")
    return params


def _param_groups(params):
    """torch's params argument: tensors (one group) or dicts, each with
    "params" and optionally "lr" and "weight_decay"."""
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if not isinstance(params[0], dict):
        return [{"params": _tensors(params)}]
    groups = []
    for g in params:
        if not isinstance(g, dict) or "params" not in g:
            raise TypeError("parameter groups are dicts with a 'params' key")
        unknown = sorted(set(g) - set(_GROUP_KEYS))
        if unknown:
            raise ValueError(
                f"parameter group options {unknown} are not supported per "
                f"group (only lr and weight_decay); set them on the "
                f"optimizer")
        groups.append(dict(g, params=_tensors(g["params"])))
    return groups


def _group_specs(groups):
    return [(g["params"],
             float(g["lr"]) if "lr" in g else None,
             float(g["weight_decay"]) if "weight_decay" in g else None)
            for g in groups]


class _Group(dict):
    """One of param_groups: setting "lr" sets that group's in the core (as a
    scheduler written for torch does)."""

    def __init__(self, optimizer, index, **values):
        super().__init__(**values)
        self._optimizer = optimizer
        self._index = index

    def __setitem__(self, key, value):
        if key == "lr":
            self._optimizer._impl.set_group_lr(self._index, float(value))
        elif key == "momentum" and "momentum" in self:
            self._optimizer._impl.momentum = float(value)
        elif key == "betas" and "betas" in self:
            self._optimizer._impl.momentum = float(value[0])
        super().__setitem__(key, value)

    def __getitem__(self, key):
        # The optimizer's own lr and momentum: schedulers in the core change
        # them.
        if key == "lr":
            return self._optimizer._impl.group_lr(self._index)
        if key == "momentum" and "momentum" in self:
            return self._optimizer._impl.momentum
        if key == "betas" and "betas" in self:
            betas = super().__getitem__("betas")
            return (self._optimizer._impl.momentum, *tuple(betas)[1:])
        return super().__getitem__(key)

    def get(self, key, default=None):
        return self[key] if key in self else default


def _nested_state(flat):
    """mixrt's flat state ("<i>.<name>": tensor) as PyTorch's
    {i: {name: tensor}}, by parameter index."""
    state = {}
    for key, value in flat.items():
        index, _, name = key.partition(".")
        state.setdefault(int(index), {})[name] = value
    return dict(sorted(state.items()))


def _flat_state(state):
    """PyTorch's {i: {name: tensor}} as mixrt's flat "<i>.<name>" keys."""
    if not isinstance(state, dict):
        raise TypeError(f"load_state_dict: 'state' is a "
                        f"{type(state).__name__}; expected a dict of "
                        f"parameter index to that parameter's state")
    flat = {}
    for index, entries in state.items():
        if isinstance(index, bool) or not isinstance(index, int) or \
                not isinstance(entries, dict):
            raise TypeError(
                f"load_state_dict: 'state' entry {index!r} is "
                f"{type(entries).__name__}; expected int parameter indices, "
                f"each mapping names to tensors")
        for name, value in entries.items():
            flat[f"{index}.{name}"] = value
    return flat


# What load_state_dict can set on a built optimizer (as a scheduler does);
# every other hyperparameter is fixed at construction and must match.
_RESTORED = ("lr", "momentum", "betas")


class Optimizer:
    def __init__(self, impl, groups, defaults):
        self._impl = impl
        self.defaults = defaults
        self.param_groups = [_Group(self, i, **dict(defaults, **g))
                             for i, g in enumerate(groups)]

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _mixrt._EnableGrad():
                loss = closure()
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none=True):
        self._impl.zero_grad(set_to_none)

    def state_dict(self):
        """PyTorch's form: {"state": {i: {"momentum_buffer": ...} or
        {"step", "exp_avg", "exp_avg_sq"[, "max_exp_avg_sq"]}},
        "param_groups": [{hyperparameters..., "params": [i, ...]}]}, the
        parameters numbered across the groups in order."""
        return {"state": _nested_state(dict(self._impl.state_dict())),
                "param_groups": self._group_dicts()}

    def _group_dicts(self):
        groups, start = [], 0
        for g in self.param_groups:
            d = {k: g[k] for k in g if k != "params"}
            d["params"] = list(range(start, start + len(g["params"])))
            start += len(g["params"])
            groups.append(d)
        return groups

    def load_state_dict(self, state_dict):
        """PyTorch's form (state_dict()'s), or mixrt's earlier flat one
        ("<i>.exp_avg": tensor, ...). Everything is checked before anything
        changes; lr, momentum and betas are restored from the groups."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict: expected a dict, got "
                            f"{type(state_dict).__name__}")
        if "state" not in state_dict and "param_groups" not in state_dict:
            self._impl.load_state_dict(dict(state_dict))
            return
        groups = state_dict.get("param_groups")
        self._check_groups(groups)
        self._impl.load_state_dict(_flat_state(state_dict.get("state", {})))
        for own, saved in zip(self.param_groups, groups):
            for key in _RESTORED:
                if key in saved and key in own:
                    own[key] = saved[key]

    def _check_groups(self, groups):
        if not isinstance(groups, list) or \
                not all(isinstance(g, dict) for g in groups):
            raise TypeError("load_state_dict: 'param_groups' must be a list "
                            "of dicts")
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of "
                             "parameter groups")
        for i, (own, saved) in enumerate(zip(self.param_groups, groups)):
            if len(saved.get("params", ())) != len(own["params"]):
                raise ValueError("loaded state dict contains a parameter "
                                 "group that doesn't match the size of "
                                 "optimizer's group")
            for key, value in saved.items():
                if key == "params" or key in _RESTORED or key not in own or \
                        own[key] == value:
                    continue
                raise ValueError(
                    f"load_state_dict: parameter group {i}'s {key!r} is "
                    f"{value!r} in the state dict but {own[key]!r} here; "
                    f"mixrt sets it when the optimizer is built (build it "
                    f"with {key}={value!r})")


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0,
                 weight_decay=0, nesterov=False, *, maximize=False):
        if dampening != 0:
            raise ValueError("SGD: dampening is not supported yet (0 only)")
        groups = _param_groups(params)
        impl = _mixrt.SGD._create(_group_specs(groups), float(lr),
                                  float(momentum), float(weight_decay),
                                  bool(nesterov), bool(maximize))
        super().__init__(impl, groups, dict(
            lr=lr, momentum=momentum, dampening=dampening,
            weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, amsgrad=False, *, maximize=False):
        groups = _param_groups(params)
        impl = _mixrt.AdamW._create(_group_specs(groups), float(lr),
                                    float(betas[0]), float(betas[1]),
                                    float(eps), float(weight_decay),
                                    bool(amsgrad), bool(maximize))
        super().__init__(impl, groups, dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            amsgrad=amsgrad, maximize=maximize))


def _group_key(name, group):
    """The core's per-group state key: "base_lr", "base_lr.1", ..."""
    return name if group == 0 else f"{name}.{group}"


def _state_argument(state_dict, what):
    if not isinstance(state_dict, dict):
        raise TypeError(f"{what}.load_state_dict: expected a dict, got "
                        f"{type(state_dict).__name__}")
    return state_dict


def _number(state, key, what):
    return _as_number(state.get(key), key, what)


def _as_number(value, key, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}.load_state_dict: {key!r} is "
                        f"{type(value).__name__}; expected a number")
    return float(value)


def _per_group(state, key, groups, what):
    values = state.get(key)
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{what}.load_state_dict: {key!r} must be a list of "
                        f"one number per param group")
    if len(values) != groups:
        raise ValueError(f"{what}.load_state_dict: {key!r} has {len(values)} "
                         f"values; the optimizer has {groups} param groups")
    return [_as_number(v, key, what) for v in values]


def _check_arguments(what, own, saved):
    """A saved schedule's arguments must be this one's: mixrt fixes them
    when the schedule is built (PyTorch's load_state_dict would overwrite
    them)."""
    for key, value in own.items():
        if key in saved and saved[key] != value:
            raise ValueError(
                f"{what}.load_state_dict: {key!r} is {saved[key]!r} in the "
                f"state dict but {value!r} here; mixrt sets it when the "
                f"schedule is built (build it with {key}={saved[key]!r})")


# What PyTorch's LRScheduler.state_dict() holds beside the schedule's own
# values, so a state saved here loads into torch and the other way round.
_TORCH_BOOKKEEPING = {"_is_initial": False,
                      "_get_lr_called_within_step": False}


class _Scheduler:
    """torch.optim.lr_scheduler.LRScheduler over the core's: chainable
    (schedulers on one optimizer compose), state_dict/load_state_dict in
    PyTorch's form."""

    def __init__(self, optimizer, impl, **arguments):
        self.optimizer = optimizer
        self._impl = impl
        # The constructor's values under PyTorch's state_dict names.
        self._arguments = arguments
        # PyTorch's count of step() calls, the constructor's included (a
        # SequentialLR's restart at a milestone is not one).
        self._step_count = 1

    def step(self):
        self._impl.step()
        self._step_count += 1

    def get_last_lr(self):
        return list(self._impl.get_last_lrs())

    @property
    def last_epoch(self):
        return self._impl.last_epoch

    def state_dict(self):
        """PyTorch's form: the schedule's arguments, base_lrs, last_epoch,
        _step_count and _last_lr."""
        core = self._impl.state_dict()
        groups = range(len(self.optimizer.param_groups))
        return dict(self._arguments,
                    base_lrs=[core[_group_key("base_lr", g)] for g in groups],
                    last_epoch=int(core["last_epoch"]),
                    _step_count=self._step_count,
                    **_TORCH_BOOKKEEPING,
                    _last_lr=[core[_group_key("last_lr", g)] for g in groups])

    def load_state_dict(self, state_dict):
        """PyTorch's form (state_dict()'s, or torch's own), or mixrt's
        earlier flat one ("last_epoch", "base_lr", "last_lr", "base_lr.1",
        ...). Everything is checked before anything changes."""
        what = type(self).__name__
        state = _state_argument(state_dict, what)
        if "base_lrs" not in state:
            self._impl.load_state_dict(
                {k: _number(state, k, what) for k in state})
            return
        _check_arguments(what, self._arguments, state)
        groups = len(self.optimizer.param_groups)
        core = {"last_epoch": _number(state, "last_epoch", what)}
        for key, name in (("base_lrs", "base_lr"), ("_last_lr", "last_lr")):
            values = _per_group(state, key, groups, what)
            core.update({_group_key(name, g): v for g, v in enumerate(values)})
        self._impl.load_state_dict(core)
        count = state.get("_step_count")
        self._step_count = count if isinstance(count, int) and \
            not isinstance(count, bool) and count >= 0 else \
            int(core["last_epoch"]) + 1


class StepLR(_Scheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        super().__init__(optimizer, _mixrt.StepLR._create(
            optimizer._impl, int(step_size), float(gamma)),
            step_size=step_size, gamma=gamma)


class CosineAnnealingLR(_Scheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):  # noqa: N803
        super().__init__(optimizer, _mixrt.CosineAnnealingLR._create(
            optimizer._impl, int(T_max), float(eta_min)),
            T_max=T_max, eta_min=eta_min)


class LinearLR(_Scheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0,
                 total_iters=5):
        super().__init__(optimizer, _mixrt.LinearLR._create(
            optimizer._impl, float(start_factor), float(end_factor),
            int(total_iters)),
            start_factor=start_factor, end_factor=end_factor,
            total_iters=total_iters)


class LambdaLR:
    """base_lr * lr_lambda(epoch), set outright (not chainable), as
    PyTorch's; lr_lambda runs in Python."""

    def __init__(self, optimizer, lr_lambda):
        if not callable(lr_lambda):
            raise TypeError("LambdaLR: lr_lambda must be callable")
        self.optimizer = optimizer
        self.lr_lambda = lr_lambda
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = -1
        self.step()

    def step(self):
        self.last_epoch += 1
        factor = float(self.lr_lambda(self.last_epoch))
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)

    def state_dict(self):
        """PyTorch's form; the lambda itself is not saved (PyTorch saves
        None for a function, as here)."""
        return {"base_lrs": list(self.base_lrs),
                "last_epoch": self.last_epoch,
                "_step_count": self.last_epoch + 1, **_TORCH_BOOKKEEPING,
                "_last_lr": list(self._last_lr),
                "lr_lambdas": [None] * len(self.base_lrs)}

    def load_state_dict(self, state_dict):
        state = _state_argument(state_dict, "LambdaLR")
        groups = len(self.optimizer.param_groups)
        epoch = _number(state, "last_epoch", "LambdaLR")
        if epoch < 0 or epoch != int(epoch):
            raise ValueError(f"LambdaLR.load_state_dict: last_epoch is "
                             f"{epoch}; expected an integer >= 0")
        base = _per_group(state, "base_lrs", groups, "LambdaLR")
        last = _per_group(state, "_last_lr", groups, "LambdaLR")
        self.last_epoch, self.base_lrs, self._last_lr = int(epoch), base, last


class ReduceLROnPlateau(_Scheduler):
    def __init__(self, optimizer, mode="min", factor=0.1, patience=10,
                 threshold=1e-4, threshold_mode="rel", cooldown=0, min_lr=0.0,
                 eps=1e-8):
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != 1:
                raise ValueError(f"expected 1 min_lrs, got {len(min_lr)}")
            min_lr = min_lr[0]
        super().__init__(optimizer, _mixrt.ReduceLROnPlateau._create(
            optimizer._impl, str(mode), float(factor), int(patience),
            float(threshold), str(threshold_mode), int(cooldown),
            float(min_lr), float(eps)),
            factor=factor, min_lrs=[min_lr] * len(optimizer.param_groups),
            patience=patience, cooldown=cooldown, eps=eps, mode=mode,
            threshold=threshold, threshold_mode=threshold_mode)

    def step(self, metrics):
        self._impl.step(float(metrics))

    def get_last_lr(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    @property
    def last_epoch(self):
        return int(self._impl.state_dict()["last_epoch"])

    @property
    def num_bad_epochs(self):
        return self._impl.num_bad_epochs

    _COUNTERS = ("last_epoch", "best", "num_bad_epochs", "cooldown_counter")

    def state_dict(self):
        """PyTorch's form: the arguments, mode_worse, best, the counters
        and _last_lr."""
        core = self._impl.state_dict()
        state = dict(self._arguments,
                     mode_worse=float("inf") if self._arguments["mode"] ==
                     "min" else float("-inf"),
                     _last_lr=self.get_last_lr())
        state.update({k: core[k] if k == "best" else int(core[k])
                      for k in self._COUNTERS})
        return state

    def load_state_dict(self, state_dict):
        """PyTorch's form or mixrt's earlier one (the counters alone)."""
        state = _state_argument(state_dict, "ReduceLROnPlateau")
        _check_arguments("ReduceLROnPlateau", self._arguments, state)
        self._impl.load_state_dict(
            {k: _number(state, k, "ReduceLROnPlateau")
             for k in self._COUNTERS if k in state})


class OneCycleLR(_Scheduler):
    """torch's 1cycle policy; cycles momentum (SGD) or betas[0] (AdamW)
    unless cycle_momentum=False."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None,
                 steps_per_epoch=None, pct_start=0.3, anneal_strategy="cos",
                 cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False):
        def one(name, value):
            if isinstance(value, (list, tuple)):
                if len(value) != 1:
                    raise ValueError(
                        f"expected 1 values for {name}, got {len(value)}")
                value = value[0]
            return float(value)
        super().__init__(optimizer, _mixrt.OneCycleLR._create(
            optimizer._impl, one("max_lr", max_lr), int(total_steps or 0),
            int(epochs or 0), int(steps_per_epoch or 0), float(pct_start),
            str(anneal_strategy), bool(cycle_momentum),
            one("base_momentum", base_momentum),
            one("max_momentum", max_momentum), float(div_factor),
            float(final_div_factor), bool(three_phase)),
            # PyTorch's names; its _schedule_phases name group keys, and
            # max_lr and the momenta live in the optimizer's groups.
            total_steps=total_steps if total_steps is not None
            else int(epochs or 0) * int(steps_per_epoch or 0),
            _anneal_func_type=anneal_strategy,
            cycle_momentum=cycle_momentum)


class SequentialLR:
    """schedulers[0] until milestones[0], then schedulers[1] restarted,
    and so on (torch.optim.lr_scheduler.SequentialLR). Takes the core's
    schedules (not LambdaLR, which runs in Python here)."""

    def __init__(self, optimizer, schedulers, milestones):
        impls = []
        for s in schedulers:
            if not isinstance(s, _Scheduler) or isinstance(
                    s, ReduceLROnPlateau):
                raise TypeError(
                    f"SequentialLR takes StepLR, CosineAnnealingLR, LinearLR "
                    f"and OneCycleLR schedules, not {type(s).__name__}")
            impls.append(s._impl)
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = [int(m) for m in milestones]
        self._impl = _mixrt.SequentialLR._create(
            optimizer._impl, impls, self._milestones)

    def step(self):
        epoch = self._impl.last_epoch + 1
        index = bisect.bisect_right(self._milestones, epoch)
        self._impl.step()
        # The schedule restarted at its milestone took no step() (PyTorch's
        # _update_lr(0)); any other did.
        if index == 0 or self._milestones[index - 1] != epoch:
            self._schedulers[index]._step_count += 1

    def get_last_lr(self):
        return [self._impl.get_last_lr()]

    @property
    def last_epoch(self):
        return self._impl.last_epoch

    def state_dict(self):
        """PyTorch's form: _milestones, last_epoch, _last_lr and each
        schedule's state_dict under _schedulers."""
        core = self._impl.state_dict()
        return {"_milestones": list(self._milestones),
                "last_epoch": int(core["last_epoch"]),
                "_last_lr": [core["last_lr"]],
                "_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict):
        """Its own and every schedule's state, all or nothing: a schedule
        that refuses its state leaves the others as they were."""
        state = _state_argument(state_dict, "SequentialLR")
        _check_arguments("SequentialLR", {"_milestones": self._milestones},
                         state)
        saved = state.get("_schedulers")
        if not isinstance(saved, (list, tuple)) or \
                len(saved) != len(self._schedulers):
            raise ValueError(
                f"SequentialLR.load_state_dict: '_schedulers' must hold "
                f"{len(self._schedulers)} state dicts, one per schedule")
        own = {"last_epoch": _number(state, "last_epoch", "SequentialLR"),
               "last_lr": _per_group(state, "_last_lr", 1, "SequentialLR")[0]}
        before = [s.state_dict() for s in self._schedulers]
        done = []
        try:
            for s, d in zip(self._schedulers, saved):
                s.load_state_dict(d)
                done.append(s)
            self._impl.load_state_dict(own)
        except Exception:
            for s, d in zip(done, before):
                s.load_state_dict(d)
            raise


lr_scheduler = types.SimpleNamespace(
    StepLR=StepLR, CosineAnnealingLR=CosineAnnealingLR, LinearLR=LinearLR,
    LambdaLR=LambdaLR, ReduceLROnPlateau=ReduceLROnPlateau,
    OneCycleLR=OneCycleLR, SequentialLR=SequentialLR)
