"""One rank of the 2-rank DDP check (run by test_distributed.py under
mpirun): each rank trains a Python module on its half of a batch with
DistributedDataParallel; rank 0 writes the final weights and losses so the
test can compare them with one process training on the whole batch."""

import json
import sys

import mixrt
from mixrt import distributed as dist
from mixrt import nn
from mixrt.nn import functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main(out_path):
    dist.init_process_group("mpi", timeout=120)
    rank, world = dist.get_rank(), dist.get_world_size()
    mixrt.manual_seed(100 + rank)  # Different initial weights per rank:
    model = Net()                  # DDP copies rank 0's everywhere.
    ddp = dist.DistributedDataParallel(model)
    opt = mixrt.optim.SGD(model.parameters(), lr=0.05)
    mixrt.manual_seed(7)
    x, y = mixrt.randn(8, 8), mixrt.randn(8, 1)
    shard = slice(rank * 8 // world, (rank + 1) * 8 // world)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(ddp(x[shard]), y[shard])
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, dist.ReduceOp.AVG)
        losses.append(t.item())
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"world": world, "losses": losses,
                       "state": {k: v.tolist()
                                 for k, v in model.state_dict().items()}}, f)
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1])
