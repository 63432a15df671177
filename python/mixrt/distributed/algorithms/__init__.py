"""mixrt.distributed.algorithms: as torch.distributed.algorithms."""
