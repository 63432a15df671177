"""The compression hooks of torch's default_hooks, run by the core (C++):
register one with DistributedDataParallel.register_comm_hook(None, hook).
Calling them directly is not supported; they name what the core does."""


def bf16_compress_hook(process_group, bucket):
    """Gradients travel as bfloat16 (divided by the world size there),
    are summed across ranks and cast back to float32."""
    raise NotImplementedError(
        "bf16_compress_hook runs inside DistributedDataParallel; register it "
        "with ddp.register_comm_hook(None, bf16_compress_hook)")


def fp16_compress_hook(process_group, bucket):
    """As bf16_compress_hook, in float16 (an overflow on any rank becomes
    inf everywhere, and every GradScaler skips that step)."""
    raise NotImplementedError(
        "fp16_compress_hook runs inside DistributedDataParallel; register it "
        "with ddp.register_comm_hook(None, fp16_compress_hook)")
