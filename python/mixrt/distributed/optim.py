"""mixrt.distributed.optim: torch.distributed.optim's
ZeroRedundancyOptimizer (ZeRO stage 1) over the core's: each rank keeps
the optimizer state of its shard of the parameters only, steps that shard
and broadcasts it, so every replica is whole again after step()."""

import inspect

from .. import _mixrt
from .. import optim as _optim


def _adamw_defaults():
    """AdamW's keyword arguments with their defaults, read from its
    signature (one place to change them)."""
    parameters = inspect.signature(_optim.AdamW.__init__).parameters
    return {name: p.default for name, p in parameters.items()
            if p.default is not inspect.Parameter.empty}


class ZeroRedundancyOptimizer(_optim.Optimizer):
    """ZeroRedundancyOptimizer(params, optimizer_class=mixrt.optim.AdamW,
    process_group=None, **defaults), as PyTorch's. The core shards AdamW
    (the optimizer whose state ZeRO is for); any other optimizer_class is
    refused. Every rank passes the same parameters in the same order.

    state_dict() follows PyTorch: it returns the whole state on the rank
    that last called consolidate_state_dict(to=rank) (a collective, every
    rank calls it) and raises elsewhere. The state is a plain AdamW's
    (PyTorch's form, mixrt.optim.Optimizer.state_dict), which mixrt.save
    writes and which loads into a ZeroRedundancyOptimizer on any number of
    ranks or into a plain AdamW.
    """

    def __init__(self, params, optimizer_class=_optim.AdamW,
                 process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if optimizer_class is not _optim.AdamW:
            name = getattr(optimizer_class, "__name__", optimizer_class)
            raise NotImplementedError(
                f"ZeroRedundancyOptimizer: mixrt shards AdamW's state; "
                f"optimizer_class {name} is not supported")
        if parameters_as_bucket_view or overlap_with_ddp:
            raise NotImplementedError(
                "ZeroRedundancyOptimizer: parameters_as_bucket_view and "
                "overlap_with_ddp are not supported (False only)")
        options = _adamw_defaults()
        unknown = sorted(set(defaults) - set(options))
        if unknown:
            raise TypeError(f"ZeroRedundancyOptimizer: unexpected AdamW "
                            f"arguments {unknown}")
        from . import _default
        group = process_group or _default()
        options.update(defaults)
        params = _optim._tensors(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        impl = _mixrt.ZeroRedundancyOptimizer._create(
            params, group, float(options["lr"]), float(options["betas"][0]),
            float(options["betas"][1]), float(options["eps"]),
            float(options["weight_decay"]), bool(options["amsgrad"]),
            bool(options["maximize"]))
        super().__init__(impl, [{"params": params}], options)

    def consolidate_state_dict(self, to=0):
        self._impl.consolidate_state_dict(int(to))

    def state_dict(self):
        # The core knows: consolidated onto this rank, no step or load since.
        if not self._impl.consolidated:
            raise RuntimeError(
                "Optimizer state has not been consolidated on this rank. "
                "Please call `consolidate_state_dict(to=0)` on all ranks "
                "beforehand if you meant to save the global state.")
        return super().state_dict()

    def owner(self, index):
        """The rank whose shard holds parameter `index`."""
        return self._impl.owner(int(index))

    @property
    def state_bytes(self):
        """Bytes of optimizer state this rank holds."""
        return self._impl.state_bytes
