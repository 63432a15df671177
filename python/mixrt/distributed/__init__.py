"""mixrt.distributed: torch.distributed's process group calls over the
core's collectives (the MPI plugin; launch with ``mpirun -np N python
train.py``; a process started without mpirun is a job of one), and
DistributedDataParallel around a module written in Python (the core's
DDP: gradient buckets all-reduced while the backward runs, rank 0's
parameters copied everywhere at construction)."""

import atexit
import weakref
from .. import _mixrt
from ..nn.module import Module


class ReduceOp:
    SUM = "sum"
    AVG = "avg"
    MAX = "max"


_group = None


def init_process_group(backend="mpi", timeout=None):
    """Joins the job this process was launched in. `timeout` (seconds, or a
    datetime.timedelta) bounds each collective; a rank that never arrives
    fails the call with an error naming it."""
    global _group
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group "
                           "twice!")
    if timeout is not None and hasattr(timeout, "total_seconds"):
        timeout = timeout.total_seconds()
    _group = _mixrt._init_process_group(backend, float(timeout or 0))
    # Dropped before the interpreter tears modules down, in whatever order
    # it does (nanobind reported the group leaked at every distributed
    # script's exit when its last reference went with this module's dict).
    atexit.register(destroy_process_group)


def is_initialized():
    return _group is not None


def _default():
    if _group is None:
        raise RuntimeError(
            "Default process group has not been initialized, please make "
            "sure to call init_process_group.")
    return _group


def destroy_process_group():
    global _group
    _group = None


def get_rank():
    return _default().rank


def get_world_size():
    return _default().world_size


def all_reduce(tensor, op=ReduceOp.SUM):
    """In place, on a contiguous float tensor, on every rank."""
    _default().all_reduce(tensor, op)


def broadcast(tensor, src):
    _default().broadcast(tensor, int(src))


def barrier():
    _default().barrier()


def _weak_forward(module):
    """module.forward, without holding the module: the C++ side keeps what
    it is given for as long as the parameters' gradient hooks keep it, a
    cycle through C++ that Python's collector cannot see (nanobind reported
    the parameters leaked at every distributed script's exit). This object
    (DistributedDataParallel.module) holds the module."""
    ref = weakref.ref(module)

    def forward(x):
        target = ref()
        if target is None:
            raise RuntimeError("DistributedDataParallel: its module is gone")
        return target.forward(x)
    return forward


class DistributedDataParallel(Module):
    """torch.nn.parallel.DistributedDataParallel for a Module with one
    tensor input: ``ddp(x)`` runs ``module(x)`` on this rank's shard, and
    ``loss.backward()`` leaves every rank with the averaged gradients."""

    def __init__(self, module, process_group=None, bucket_cap_mb=25,
                 broadcast_buffers=True, find_unused_parameters=False):
        super().__init__()
        self.module = module
        group = process_group or _default()
        impl = _mixrt._distributed_data_parallel(
            _weak_forward(module), list(module.named_parameters()),
            list(module.named_buffers()), group, float(bucket_cap_mb),
            bool(broadcast_buffers), bool(find_unused_parameters))
        object.__setattr__(self, "_impl", impl)

    def forward(self, x):
        return self._impl.forward(x)

    def register_comm_hook(self, state, hook):
        """PyTorch's: the hooks of
        mixrt.distributed.algorithms.ddp_comm_hooks: default_hooks'
        bf16_compress_hook and fp16_compress_hook (state None), and
        powerSGD_hook with a powerSGD_hook.PowerSGDState."""
        from .algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
        if hook is powerSGD_hook.powerSGD_hook:
            if not isinstance(state, powerSGD_hook.PowerSGDState):
                raise TypeError("powerSGD_hook needs a PowerSGDState as its "
                                "state")
            _mixrt._ddp_register_power_sgd_hook(
                self._impl, state.matrix_approximation_rank,
                state.start_powerSGD_iter, state.min_compression_rate,
                state.use_error_feedback, state.warm_start,
                state.orthogonalization_epsilon, state.random_seed)
            return
        names = {default_hooks.bf16_compress_hook: "bf16",
                 default_hooks.fp16_compress_hook: "fp16"}
        if hook not in names:
            raise NotImplementedError(
                "register_comm_hook: mixrt runs bf16_compress_hook, "
                "fp16_compress_hook (mixrt.distributed.algorithms."
                "ddp_comm_hooks.default_hooks) and powerSGD_hook "
                "(ddp_comm_hooks.powerSGD_hook); custom hooks are not "
                "supported")
        _mixrt._ddp_register_comm_hook(self._impl, names[hook])

    def train(self, mode=True):
        super().train(mode)
        self._impl.train(mode)
        return self
