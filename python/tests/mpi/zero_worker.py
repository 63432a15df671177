"""One rank of the 2-rank ZeroRedundancyOptimizer check (run by
test_distributed.py under mpirun): DistributedDataParallel + ZeRO-1 AdamW
on each rank's half of a batch; rank 0 writes the final weights, the
consolidated optimizer state and what each rank held, so the test can
compare them with one process running plain AdamW on the whole batch."""

import json
import sys

import mixrt
from mixrt import distributed as dist
from mixrt.distributed.optim import ZeroRedundancyOptimizer
from mixrt.nn import functional as F

from ddp_worker import Net


def main(out_path):
    dist.init_process_group("mpi", timeout=120)
    rank, world = dist.get_rank(), dist.get_world_size()
    mixrt.manual_seed(100 + rank)
    model = Net()
    ddp = dist.DistributedDataParallel(model)
    opt = ZeroRedundancyOptimizer(model.parameters(),
                                  optimizer_class=mixrt.optim.AdamW, lr=0.05,
                                  weight_decay=0.1)
    mixrt.manual_seed(7)
    x, y = mixrt.randn(8, 8), mixrt.randn(8, 1)
    shard = slice(rank * 8 // world, (rank + 1) * 8 // world)
    for _ in range(5):
        opt.zero_grad()
        F.mse_loss(ddp(x[shard]), y[shard]).backward()
        opt.step()
    owners = [opt.owner(i) for i in range(len(list(model.parameters())))]
    state_bytes = [0.0] * world
    mine = mixrt.tensor([float(opt.state_bytes) if r == rank else 0.0
                         for r in range(world)])
    dist.all_reduce(mine)
    state_bytes = mine.tolist()
    try:
        opt.state_dict()
        unconsolidated = "returned"
    except RuntimeError as e:
        unconsolidated = str(e)
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"world": world, "owners": owners,
                       "state_bytes": state_bytes,
                       "unconsolidated": unconsolidated,
                       "state": {k: v.tolist()
                                 for k, v in model.state_dict().items()},
                       "optimizer": {
                           f"{i}.{name}": t.tolist()
                           for i, entry in opt.state_dict()["state"].items()
                           for name, t in entry.items()}}, f)
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1])
