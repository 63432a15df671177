"""mixrt.distributed: two ranks under mpirun train a Python module with
DistributedDataParallel and end with the weights one process gets on the
whole batch (float32 sums in another order: 1e-5 relative)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import mixrt
from mixrt import distributed as dist
from mixrt.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def single_process_reference():
    sys.path.insert(0, os.path.join(HERE, "mpi"))
    try:
        from ddp_worker import Net
    finally:
        sys.path.pop(0)
    mixrt.manual_seed(100)  # Rank 0's initial weights.
    model = Net()
    opt = mixrt.optim.SGD(model.parameters(), lr=0.05)
    mixrt.manual_seed(7)
    x, y = mixrt.randn(8, 8), mixrt.randn(8, 1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.tolist() for k, v in model.state_dict().items()}


def run_two_ranks(worker, out):
    """Runs python/tests/mpi/<worker> on 2 ranks under mpirun; it writes
    rank 0's results as JSON to `out`, which is returned parsed."""
    # As tests/distributed/mpirun_test.sh: no CMA between processes (often
    # forbidden in containers), and session files of this job's own in a
    # short path (PMIx puts a Unix socket there).
    session = tempfile.mkdtemp(prefix="mixrt-mpi.")
    env = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_orte_tmpdir_base=session,
               OMPI_MCA_btl_vader_backing_directory=session,
               MIXRT_DIST_TIMEOUT_S="60",
               PYTHONPATH=os.pathsep.join(
                   [os.path.join(HERE, "mpi"), os.environ.get("PYTHONPATH",
                                                               "")]))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
           sys.executable, os.path.join(HERE, "mpi", worker), str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=300, env=env)
    finally:
        shutil.rmtree(session, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # Nothing left for nanobind to report at exit (the module's parameters
    # and the process group leaked in every distributed script).
    assert "nanobind: leaked" not in done.stderr, done.stderr
    return json.loads(out.read_text())


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_two_ranks_train_to_the_single_process_result(tmp_path):
    result = run_two_ranks("ddp_worker.py", tmp_path / "rank0.json")
    assert result["world"] == 2
    losses, state = single_process_reference()
    # The mean of two half-batch losses is the whole batch's loss.
    np.testing.assert_allclose(result["losses"], losses, rtol=1e-5)
    for k, v in state.items():
        np.testing.assert_allclose(result["state"][k], v, rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_a_module_level_script_leaves_nothing_behind(tmp_path):
    # run_two_ranks fails on any "nanobind: leaked" at exit: the module's
    # parameters (held by C++ through its forward) and the process group
    # (the last reference going with the module's dict) were reported.
    result = run_two_ranks("script_worker.py", tmp_path / "rank0.json")
    assert result["world"] == 2


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_zero_redundancy_optimizer_on_two_ranks_is_adamw(tmp_path):
    result = run_two_ranks("zero_worker.py", tmp_path / "rank0.json")
    # One process, plain AdamW, the whole batch.
    state, optimizer = adamw_reference()
    # Both ranks own parameters, and each holds less than the whole state.
    assert sorted(set(result["owners"])) == [0, 1]
    whole = sum(np.asarray(v).size * 4 for v in optimizer.values())
    assert all(0 < b < whole for b in result["state_bytes"])
    assert "consolidate_state_dict" in result["unconsolidated"]
    # The averaged half-batch gradients are the whole batch's up to f32
    # sums in another order (1e-5 relative, as the DDP test); measured:
    # weights 3e-8 apart, moments 2e-8 (exp_avg) and 2e-10 (exp_avg_sq).
    for k, v in state.items():
        np.testing.assert_allclose(result["state"][k], v, rtol=1e-5,
                                   atol=1e-6, err_msg=k)
    assert sorted(result["optimizer"]) == sorted(optimizer)
    for k, v in optimizer.items():
        np.testing.assert_allclose(result["optimizer"][k], v, rtol=1e-5,
                                   atol=1e-9, err_msg=k)


def adamw_reference():
    sys.path.insert(0, os.path.join(HERE, "mpi"))
    try:
        from ddp_worker import Net
    finally:
        sys.path.pop(0)
    mixrt.manual_seed(100)
    model = Net()
    opt = mixrt.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    mixrt.manual_seed(7)
    x, y = mixrt.randn(8, 8), mixrt.randn(8, 1)
    for _ in range(5):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return ({k: v.tolist() for k, v in model.state_dict().items()},
            {f"{i}.{name}": t.tolist()
             for i, entry in opt.state_dict()["state"].items()
             for name, t in entry.items()})


def test_zero_redundancy_optimizer_in_a_job_of_one_is_adamw_bit_for_bit():
    from mixrt.distributed.optim import ZeroRedundancyOptimizer
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    mixrt.manual_seed(5)
    a = mixrt.nn.Linear(6, 3)
    b = mixrt.nn.Linear(6, 3)
    b.load_state_dict(a.state_dict())
    plain = mixrt.optim.AdamW(a.parameters(), lr=0.1, amsgrad=True)
    zero = ZeroRedundancyOptimizer(b.parameters(), lr=0.1, amsgrad=True)
    x = mixrt.randn(4, 6)
    for _ in range(3):
        for model, opt in ((a, plain), (b, zero)):
            opt.zero_grad()
            out = model(x)
            (out * out).sum().backward()
            opt.step()
    np.testing.assert_array_equal(b.weight.detach().numpy(),
                                  a.weight.detach().numpy())
    zero.consolidate_state_dict(to=0)
    got, want = zero.state_dict(), plain.state_dict()
    assert got["param_groups"] == want["param_groups"]
    assert sorted(got["state"]) == sorted(want["state"])
    for i, entry in want["state"].items():
        assert sorted(got["state"][i]) == sorted(entry)
        for name, t in entry.items():
            np.testing.assert_array_equal(got["state"][i][name].numpy(),
                                          t.numpy())
    # The whole state loads into a fresh plain AdamW (and back).
    fresh = mixrt.optim.AdamW(b.parameters(), lr=0.1, amsgrad=True)
    fresh.load_state_dict(got)
    zero.load_state_dict(plain.state_dict())
    with pytest.raises(NotImplementedError, match="shards AdamW"):
        ZeroRedundancyOptimizer(b.parameters(),
                                optimizer_class=mixrt.optim.SGD, lr=0.1)
    with pytest.raises(TypeError, match="momentum"):
        ZeroRedundancyOptimizer(b.parameters(), momentum=0.9)


def test_a_process_without_mpirun_is_a_job_of_one():
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    assert dist.get_world_size() == 1 and dist.get_rank() == 0
    t = mixrt.tensor([1.0, 2.0])
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group("mpi")


def test_bf16_compress_hook_in_a_job_of_one():
    # World 1: the hook casts each gradient to bfloat16 (divided by 1) and
    # back, so the reduced gradients are the plain ones rounded to bf16.
    import numpy as np
    from mixrt.distributed.algorithms.ddp_comm_hooks import default_hooks
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    mixrt.manual_seed(3)
    plain = mixrt.nn.Linear(8, 4)
    hooked = mixrt.nn.Linear(8, 4)
    hooked.load_state_dict(plain.state_dict())
    ddp = dist.DistributedDataParallel(hooked)
    ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    x = mixrt.randn(5, 8)
    plain(x).sum().backward()
    ddp(x).sum().backward()
    want = plain.weight.grad.to(mixrt.bfloat16).to(mixrt.float32).numpy()
    np.testing.assert_array_equal(hooked.weight.grad.numpy(), want)
    assert not np.array_equal(want, plain.weight.grad.numpy())
    with pytest.raises(RuntimeError, match="only be called once"):
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    with pytest.raises(NotImplementedError, match="custom hooks"):
        ddp.register_comm_hook(None, lambda state, bucket: None)


def test_power_sgd_hook_projects_each_weight_on_one_direction():
    # World 1, rank 1: after start_powerSGD_iter plain backwards, the
    # weight's gradient G becomes u u^T G (u: the orthogonalized P); the
    # bias (not worth compressing) stays G.
    from mixrt.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    mixrt.manual_seed(3)
    plain = mixrt.nn.Linear(16, 32)
    hooked = mixrt.nn.Linear(16, 32)
    hooked.load_state_dict(plain.state_dict())
    ddp = dist.DistributedDataParallel(hooked)
    state = powerSGD_hook.PowerSGDState(None, start_powerSGD_iter=2)
    ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    x = mixrt.randn(8, 16)
    for step in range(3):
        plain.zero_grad()
        ddp.zero_grad()
        plain(x).tanh().sum().backward()
        ddp(x).tanh().sum().backward()
        g = plain.weight.grad.numpy().astype(np.float64)
        got = hooked.weight.grad.numpy().astype(np.float64)
        np.testing.assert_allclose(hooked.bias.grad.numpy(),
                                   plain.bias.grad.numpy(), rtol=1e-6)
        if step < 2:
            np.testing.assert_array_equal(got, g)
            continue
        u = got[:, np.argmax(np.linalg.norm(got, axis=0))].copy()
        u /= np.linalg.norm(u)
        np.testing.assert_allclose(got, np.outer(u, u @ g),
                                   atol=1e-5 * np.linalg.norm(g))
        assert np.linalg.norm(got - g) > 0.05 * np.linalg.norm(g)


def test_power_sgd_state_is_checked():
    from mixrt.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    ddp = dist.DistributedDataParallel(mixrt.nn.Linear(4, 4))
    with pytest.raises(ValueError, match="start_powerSGD_iter must be > 1"):
        ddp.register_comm_hook(
            powerSGD_hook.PowerSGDState(None, start_powerSGD_iter=1),
            powerSGD_hook.powerSGD_hook)
    with pytest.raises(TypeError, match="PowerSGDState"):
        ddp.register_comm_hook(None, powerSGD_hook.powerSGD_hook)
    with pytest.raises(NotImplementedError, match="process_group"):
        powerSGD_hook.PowerSGDState(object())
