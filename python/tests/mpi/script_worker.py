"""One rank of a DDP script written as people write them: everything at
module level, no destroy_process_group() (run by test_distributed.py under
mpirun). Module-level objects live until the interpreter tears modules
down, which is when nanobind looks for what was never freed."""

import json
import sys

import mixrt
from mixrt import distributed as dist
from mixrt import nn

dist.init_process_group("mpi", timeout=120)
model = nn.Linear(8, 1)
ddp = dist.DistributedDataParallel(model)
opt = mixrt.optim.SGD(ddp.parameters(), lr=0.1)
x = mixrt.ones(4, 8)
loss = ddp(x).sum()
loss.backward()
opt.step()
if dist.get_rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump({"world": dist.get_world_size(), "loss": loss.item()}, f)
