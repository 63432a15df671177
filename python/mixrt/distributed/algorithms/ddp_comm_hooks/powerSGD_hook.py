"""torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook, run by the
core (C++): register with
ddp.register_comm_hook(PowerSGDState(None, ...), powerSGD_hook).
Calling the hook directly is not supported; it names what the core does.

Each float32 gradient matrix travels as two rank-r factors (P = M Q and
Q = M^T P, summed across ranks, P orthogonalized), with error feedback and
warm start; tensors whose factors would not save min_compression_rate
times their size travel as they are; the first start_powerSGD_iter
backwards all-reduce plainly."""


class PowerSGDState:
    """PyTorch's PowerSGDState: the hook's hyperparameters. process_group
    must be None (the DDP's group); batch_tensors_with_same_shape and
    compression_stats_logging_frequency are accepted and ignored (they
    change speed and logging, not results)."""

    def __init__(self, process_group, matrix_approximation_rank=1,
                 start_powerSGD_iter=1_000,  # noqa: N803
                 min_compression_rate=2, use_error_feedback=True,
                 warm_start=True, orthogonalization_epsilon=0,
                 random_seed=0, compression_stats_logging_frequency=10_000,
                 batch_tensors_with_same_shape=False):
        if process_group is not None:
            raise NotImplementedError(
                "PowerSGDState: process_group must be None (the hook "
                "reduces over the DistributedDataParallel's group)")
        self.process_group = None
        self.matrix_approximation_rank = int(matrix_approximation_rank)
        self.start_powerSGD_iter = int(start_powerSGD_iter)
        self.min_compression_rate = float(min_compression_rate)
        self.use_error_feedback = bool(use_error_feedback)
        self.warm_start = bool(warm_start)
        self.orthogonalization_epsilon = float(orthogonalization_epsilon)
        self.random_seed = int(random_seed)
        self.compression_stats_logging_frequency = int(
            compression_stats_logging_frequency)
        self.batch_tensors_with_same_shape = bool(
            batch_tensors_with_same_shape)


def powerSGD_hook(state, bucket):  # noqa: N802
    """Low-rank gradient compression with error feedback (Vogels et al.)."""
    raise NotImplementedError(
        "powerSGD_hook runs inside DistributedDataParallel; register it "
        "with ddp.register_comm_hook(PowerSGDState(None), powerSGD_hook)")
