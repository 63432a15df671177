"""LR schedulers' state_dict in PyTorch's form: the keys and values PyTorch
2.15 writes for the same schedule (its output pasted below as the
reference), resuming through mixrt.save / mixrt.load to the same lrs as an
uninterrupted run, PyTorch-made states loading here, and bad states refused
before anything changes."""

import pytest

import mixrt
from mixrt import nn

lr_scheduler = mixrt.optim.lr_scheduler

# torch.optim.lr_scheduler's state_dict() (PyTorch 2.15) after the steps
# each test names, on torch.optim.SGD(lr=0.1).
TORCH_STEP_LR_AFTER_3 = {
    "step_size": 2, "gamma": 0.5, "base_lrs": [0.1], "last_epoch": 3,
    "_step_count": 4, "_is_initial": False,
    "_get_lr_called_within_step": False, "_last_lr": [0.05]}
TORCH_SEQUENTIAL_AFTER_2 = {
    "_milestones": [3], "last_epoch": 2, "_last_lr": [0.07],
    "_schedulers": [
        {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 3,
         "base_lrs": [0.1], "last_epoch": 2, "_step_count": 3,
         "_is_initial": False, "_get_lr_called_within_step": False,
         "_last_lr": [0.07]},
        {"T_max": 4, "eta_min": 0.001, "base_lrs": [0.1], "last_epoch": -1,
         "_step_count": 1, "_is_initial": False,
         "_get_lr_called_within_step": False,
         "_last_lr": [0.010000000000000002]}]}
# PyTorch's next three lrs of that SequentialLR (across the milestone).
TORCH_SEQUENTIAL_STEPS_3_TO_5 = [
    "0x1.999999999999ap-4", "0x1.5e371ed32626fp-4", "0x1.9db22d0e56042p-5"]
TORCH_PLATEAU_AFTER_3 = {
    "factor": 0.5, "default_min_lr": 0.03, "min_lrs": [0.03], "patience": 1,
    "cooldown": 0, "eps": 1e-08, "last_epoch": 3, "_last_lr": [0.05],
    "mode_worse": float("inf"), "mode": "min", "threshold": 0.0001,
    "threshold_mode": "rel", "best": 1.0, "cooldown_counter": 0,
    "num_bad_epochs": 0}


def sgd(lr=0.1):
    return mixrt.optim.SGD([nn.Parameter(mixrt.zeros(1))], lr=lr)


def sequential(opt):
    warm = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.001)
    return lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])


def stepped(sched, steps):
    for _ in range(steps):
        sched.step()
    return sched


def test_state_dicts_are_pytorchs():
    assert stepped(lr_scheduler.StepLR(sgd(), 2, 0.5), 3).state_dict() == \
        TORCH_STEP_LR_AFTER_3
    assert stepped(sequential(sgd()), 2).state_dict() == \
        TORCH_SEQUENTIAL_AFTER_2
    # Past the milestone (epoch 3 restarts the cosine without a step()):
    # PyTorch's (last_epoch, _step_count) of each schedule after 4 steps.
    after_4 = stepped(sequential(sgd()), 4).state_dict()["_schedulers"]
    assert [(d["last_epoch"], d["_step_count"]) for d in after_4] == \
        [(2, 3), (1, 2)]
    plateau = lr_scheduler.ReduceLROnPlateau(sgd(), factor=0.5, patience=1,
                                             min_lr=0.03)
    for metric in (1.0, 1.0, 1.0):
        plateau.step(metric)
    # default_min_lr is PyTorch's bookkeeping for a scalar min_lr.
    want = {k: v for k, v in TORCH_PLATEAU_AFTER_3.items()
            if k != "default_min_lr"}
    assert plateau.state_dict() == want
    lam = stepped(lr_scheduler.LambdaLR(sgd(), lambda e: 0.5 ** e), 2)
    assert lam.state_dict() == {
        "base_lrs": [0.1], "last_epoch": 2, "_step_count": 3,
        "_is_initial": False, "_get_lr_called_within_step": False,
        "_last_lr": [0.025], "lr_lambdas": [None]}


def test_pytorch_made_states_load_and_continue_as_pytorch():
    opt = sgd()
    seq = sequential(opt)
    seq.load_state_dict(TORCH_SEQUENTIAL_AFTER_2)
    opt.param_groups[0]["lr"] = 0.07  # As the optimizer's state restores.
    got = []
    for _ in range(3):
        seq.step()
        got.append(opt.param_groups[0]["lr"])
    assert got == [float.fromhex(v) for v in TORCH_SEQUENTIAL_STEPS_3_TO_5]

    step = lr_scheduler.StepLR(sgd(), 2, 0.5)
    step.load_state_dict(TORCH_STEP_LR_AFTER_3)
    assert step.last_epoch == 3 and step.get_last_lr() == [0.05]
    plateau = lr_scheduler.ReduceLROnPlateau(sgd(), factor=0.5, patience=1,
                                             min_lr=0.03)
    plateau.load_state_dict(TORCH_PLATEAU_AFTER_3)
    assert plateau.last_epoch == 3


@pytest.mark.parametrize("make", [
    lambda o: lr_scheduler.StepLR(o, 2, 0.5),
    lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    lambda o: lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=10),
    sequential,
])
def test_resuming_through_a_checkpoint_steps_as_the_uninterrupted_run(
        tmp_path, make):
    opt = mixrt.optim.SGD([nn.Parameter(mixrt.zeros(1))], lr=0.1,
                          momentum=0.9)
    sched = make(opt)
    stepped(sched, 3)
    path = tmp_path / "ckpt.mixrt"
    mixrt.save({"optimizer": opt.state_dict(),
                "scheduler": sched.state_dict()}, path)
    want = []
    for _ in range(4):
        sched.step()
        want.append(opt.param_groups[0]["lr"])

    loaded = mixrt.load(path)
    opt2 = mixrt.optim.SGD([nn.Parameter(mixrt.zeros(1))], lr=0.1,
                           momentum=0.9)
    sched2 = make(opt2)
    opt2.load_state_dict(loaded["optimizer"])
    sched2.load_state_dict(loaded["scheduler"])
    got = []
    for _ in range(4):
        sched2.step()
        got.append(opt2.param_groups[0]["lr"])
    assert got == want


def test_bad_states_are_refused_before_anything_changes():
    sched = stepped(lr_scheduler.StepLR(sgd(), 2, 0.5), 1)
    before = sched.state_dict()
    with pytest.raises(TypeError, match="expected a dict"):
        sched.load_state_dict([1, 2])
    with pytest.raises(ValueError, match="'gamma' is 0.1 in the state dict "
                       "but 0.5 here.*gamma=0.1"):
        sched.load_state_dict(dict(TORCH_STEP_LR_AFTER_3, gamma=0.1))
    with pytest.raises(ValueError, match="'base_lrs' has 2 values; the "
                       "optimizer has 1 param groups"):
        sched.load_state_dict(dict(TORCH_STEP_LR_AFTER_3,
                                   base_lrs=[0.1, 0.1]))
    with pytest.raises(TypeError, match="'last_epoch' is str"):
        sched.load_state_dict(dict(TORCH_STEP_LR_AFTER_3, last_epoch="3"))
    with pytest.raises(ValueError, match="last_epoch is 2.5"):
        sched.load_state_dict(dict(TORCH_STEP_LR_AFTER_3, last_epoch=2.5))
    assert sched.state_dict() == before

    seq = stepped(sequential(sgd()), 1)
    before = seq.state_dict()
    # The second schedule refuses its state after the first took its own:
    # the first is put back.
    bad = dict(TORCH_SEQUENTIAL_AFTER_2, _schedulers=[
        TORCH_SEQUENTIAL_AFTER_2["_schedulers"][0],
        dict(TORCH_SEQUENTIAL_AFTER_2["_schedulers"][1], T_max=9)])
    with pytest.raises(ValueError, match="'T_max' is 9"):
        seq.load_state_dict(bad)
    assert seq.state_dict() == before
    with pytest.raises(ValueError, match="'_milestones' is \\[5\\]"):
        seq.load_state_dict(dict(TORCH_SEQUENTIAL_AFTER_2, _milestones=[5]))
    with pytest.raises(ValueError, match="2 state dicts"):
        seq.load_state_dict(dict(TORCH_SEQUENTIAL_AFTER_2, _schedulers=[]))
    assert seq.state_dict() == before
