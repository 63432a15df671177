"""Modules written in Python: registration by attribute assignment,
traversal, state_dict, train/eval, the layers against NumPy, and a model
that trains (its loss falls)."""

import numpy as np
import pytest

import mixrt
from mixrt import nn
from mixrt.nn import functional as F


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2, bias=False)
        self.scale = nn.Parameter(mixrt.ones(1))
        self.register_buffer("steps", mixrt.zeros(1))
        self.not_a_parameter = mixrt.ones(3)  # A plain tensor attribute.

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))) * self.scale


def test_registration_and_traversal():
    m = TwoLayer()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert all(p.requires_grad for p in m.parameters())
    assert [n for n, _ in m.named_buffers()] == ["steps"]
    assert list(m.state_dict()) == ["scale", "steps", "fc1.weight",
                                    "fc1.bias", "fc2.weight"]
    assert [n for n, _ in m.named_children()] == ["fc1", "fc2"]
    assert m.fc1.weight.shape == (8, 4)
    assert m.fc2.bias is None
    m.eval()
    assert not m.training and not m.fc1.training
    m.train()
    assert m.fc2.training
    with pytest.raises(AttributeError):
        m.missing


def test_linear_matches_numpy_and_its_init_bound():
    lin = nn.Linear(16, 3)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= 1 / 4  # 1/sqrt(in_features)
    x = mixrt.randn(5, 16)
    np.testing.assert_allclose(
        lin(x).detach().numpy(),
        x.numpy() @ w.T + lin.bias.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_layer_norm_and_softmax_against_numpy():
    x = mixrt.randn(3, 6)
    xn = x.numpy().astype(np.float64)
    ln = nn.LayerNorm(6)
    ref = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(
        xn.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(x).detach().numpy(), ref, rtol=1e-5,
                               atol=1e-5)
    e = np.exp(xn - xn.max(-1, keepdims=True))
    np.testing.assert_allclose(F.softmax(x, -1).numpy(),
                               e / e.sum(-1, keepdims=True), rtol=1e-5,
                               atol=1e-7)


def test_cross_entropy_against_numpy():
    logits = mixrt.randn(4, 5)
    target = mixrt.tensor([0, 3, 4, 1])
    z = logits.numpy().astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    ref = np.mean(lse - z[np.arange(4), [0, 3, 4, 1]])
    assert abs(F.cross_entropy(logits, target).item() - ref) < 1e-5


def test_sequential_and_dropout_in_eval():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Dropout(0.5))
    assert len(model) == 3 and isinstance(model[1], nn.ReLU)
    model.eval()
    x = mixrt.randn(2, 3)
    a = model(x).detach().numpy()
    b = model(x).detach().numpy()
    np.testing.assert_array_equal(a, b)  # Dropout is identity in eval.


def test_a_python_module_trains_with_sgd_and_adamw():
    for make in (lambda p: mixrt.optim.SGD(p, lr=0.05, momentum=0.9),
                 lambda p: mixrt.optim.AdamW(p, lr=0.01)):
        mixrt.manual_seed(0)
        model = TwoLayer()
        opt = make(model.parameters())
        x = mixrt.randn(32, 4)
        y = mixrt.randn(32, 2)
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < 0.8 * losses[0]


def test_state_dict_round_trip_through_save_and_load(tmp_path):
    a, b = TwoLayer(), TwoLayer()
    path = tmp_path / "model.mixrt"
    mixrt.save(a.state_dict(), path)
    b.load_state_dict(mixrt.load(path))
    x = mixrt.randn(2, 4)
    np.testing.assert_array_equal(a(x).detach().numpy(),
                                  b(x).detach().numpy())
    with pytest.raises(RuntimeError, match="missing keys"):
        b.load_state_dict({"scale": mixrt.ones(1)})


def test_a_damaged_checkpoint_is_refused(tmp_path):
    path = tmp_path / "model.mixrt"
    mixrt.save({"w": mixrt.randn(64)}, path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(Exception) as raised:
        mixrt.load(path)
    assert not isinstance(raised.value, SystemError)
    path.write_bytes(b"")
    with pytest.raises(Exception):
        mixrt.load(path)


def test_scheduler_changes_the_learning_rate():
    model = nn.Linear(2, 2)
    opt = mixrt.optim.SGD(model.parameters(), lr=1.0)
    sched = mixrt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(4):
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == [1.0, 0.5, 0.5, 0.25]
    assert opt.param_groups[0]["lr"] == 0.25


def _sgd(lr):
    return mixrt.optim.SGD([nn.Parameter(mixrt.zeros(1))], lr=lr)


def test_schedulers_compose_and_match_pytorch():
    # PyTorch 2.15's values (tests/train/golden/lr_schedules.tsv, case
    # warmup_then_step): a LinearLR warm-up under a StepLR decay.
    want = [0.05, 0.06666666666666667, 0.041666666666666664,
            0.049999999999999996, 0.024999999999999998, 0.024999999999999998,
            0.012499999999999999, 0.012499999999999999, 0.0062499999999999995]
    opt = _sgd(0.1)
    warm = mixrt.optim.lr_scheduler.LinearLR(opt, start_factor=0.5,
                                             total_iters=3)
    decay = mixrt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    got = [opt.param_groups[0]["lr"]]
    for _ in range(8):
        warm.step()
        decay.step()
        got.append(opt.param_groups[0]["lr"])
    assert got == want
    assert decay.get_last_lr() == [got[-1]]
    state = decay.state_dict()
    assert state["last_epoch"] == 8
    with pytest.raises(ValueError, match="no 'base_lr'"):
        decay.load_state_dict({"last_epoch": 1, "last_lr": 0.1})


def test_one_cycle_and_sequential_match_pytorch():
    # PyTorch 2.15's values (tests/train/golden/lr_schedules.tsv, cases
    # onecycle_cos and sequential_warmup_cosine), first steps.
    golden = {
        "onecycle_cos": ["0x1.47ae147ae1480p-5", "0x1.0a3d70a3d70a4p-1",
                         "0x1.0000000000000p+0"],
        "sequential_warmup_cosine": [
            "0x1.47ae147ae147cp-7", "0x1.47ae147ae147bp-5",
            "0x1.1eb851eb851ecp-4", "0x1.999999999999ap-4",
            "0x1.5e371ed32626fp-4"],
        "onecycle_cos/momentum": ["0x1.e666666666666p-1",
                                  "0x1.cccccccccccccp-1",
                                  "0x1.b333333333333p-1"],
    }
    opt = mixrt.optim.SGD([nn.Parameter(mixrt.zeros(1))], lr=0.1,
                          momentum=0.9)
    sched = mixrt.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0,
                                                total_steps=10)
    lrs, momenta = [], []
    for _ in range(3):
        lrs.append(opt.param_groups[0]["lr"])
        momenta.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    assert lrs == [float.fromhex(v) for v in golden["onecycle_cos"]]
    assert momenta == [float.fromhex(v)
                       for v in golden["onecycle_cos/momentum"]]

    opt = _sgd(0.1)
    warm = mixrt.optim.lr_scheduler.LinearLR(opt, start_factor=0.1,
                                             total_iters=3)
    cos = mixrt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4,
                                                     eta_min=0.001)
    seq = mixrt.optim.lr_scheduler.SequentialLR(opt, [warm, cos],
                                                milestones=[3])
    got = [opt.param_groups[0]["lr"]]
    for _ in range(4):
        seq.step()
        got.append(opt.param_groups[0]["lr"])
    # The cosine restarts from the base lr at the milestone.
    assert got == [float.fromhex(v)
                   for v in golden["sequential_warmup_cosine"]]
    with pytest.raises(TypeError, match="not LambdaLR"):
        mixrt.optim.lr_scheduler.SequentialLR(
            opt, [warm, mixrt.optim.lr_scheduler.LambdaLR(opt, lambda e: 1)],
            milestones=[2])


def test_param_groups_step_as_separate_optimizers():
    def params(seed):
        rng = np.random.default_rng(seed)
        ps = [nn.Parameter(mixrt.tensor(rng.standard_normal(4).astype(
            np.float32))) for _ in range(2)]
        for p in ps:
            (p * mixrt.tensor(rng.standard_normal(4).astype(
                np.float32))).sum().backward()
        return ps
    a, b = params(3), params(3)
    grouped = mixrt.optim.AdamW(
        [{"params": [a[0]]}, {"params": [a[1]], "lr": 0.05,
                              "weight_decay": 0.0}],
        lr=0.01, weight_decay=0.1)
    first = mixrt.optim.AdamW([b[0]], lr=0.01, weight_decay=0.1)
    second = mixrt.optim.AdamW([b[1]], lr=0.05, weight_decay=0.0)
    grouped.step()
    first.step()
    second.step()
    for x, y in zip(a, b):
        assert x.detach().numpy().tolist() == y.detach().numpy().tolist()
    assert [g["lr"] for g in grouped.param_groups] == [0.01, 0.05]
    assert grouped.param_groups[1]["weight_decay"] == 0.0
    sched = mixrt.optim.lr_scheduler.StepLR(grouped, step_size=1, gamma=0.5)
    sched.step()
    assert sched.get_last_lr() == [0.005, 0.025]
    with pytest.raises(ValueError, match="more than one parameter group"):
        mixrt.optim.SGD([{"params": [a[0]]}, {"params": [a[0]]}], lr=0.1)
    with pytest.raises(ValueError, match="not supported per group"):
        mixrt.optim.SGD([{"params": [a[0]], "momentum": 0.9}], lr=0.1)


def test_sdpa_grouped_query_heads():
    q = mixrt.randn(1, 4, 3, 8)
    k = mixrt.randn(1, 2, 5, 8)
    v = mixrt.randn(1, 2, 5, 8)
    got = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    kk = np.repeat(k.numpy(), 2, axis=1)
    vv = np.repeat(v.numpy(), 2, axis=1)
    want = F.scaled_dot_product_attention(q, mixrt.tensor(kk),
                                          mixrt.tensor(vv))
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


def test_maximize_ascends():
    # torch's maximize: a step on g ascending equals a step on -g.
    for cls in (mixrt.optim.SGD, mixrt.optim.AdamW):
        a = nn.Parameter(mixrt.tensor([1.0, -2.0]))
        b = nn.Parameter(mixrt.tensor([1.0, -2.0]))
        up = cls([a], lr=0.1, maximize=True)
        down = cls([b], lr=0.1)
        (a * mixrt.tensor([0.5, 0.25])).sum().backward()
        (b * mixrt.tensor([-0.5, -0.25])).sum().backward()
        up.step()
        down.step()
        assert a.detach().numpy().tolist() == b.detach().numpy().tolist()
        assert a.detach().numpy()[0] > 1.0


def test_adamw_amsgrad_against_numpy():
    # torch.optim.AdamW(amsgrad=True) in double: a large gradient, then
    # small ones, so the running maximum of exp_avg_sq decides the steps.
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.99, 1e-8, 0.01
    p = nn.Parameter(mixrt.tensor([1.0, -2.0, 0.5]))
    opt = mixrt.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps,
                            weight_decay=wd, amsgrad=True)
    want = np.array([1.0, -2.0, 0.5])
    m = np.zeros(3)
    v = np.zeros(3)
    v_max = np.zeros(3)
    for t, scale in enumerate([4.0, 0.3, 0.3, 0.3], start=1):
        g = scale * np.array([0.5, -1.0, 0.25])
        (p * mixrt.tensor(g.astype(np.float32))).sum().backward()
        opt.step()
        opt.zero_grad()
        want *= 1 - lr * wd
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        v_max = np.maximum(v_max, v)
        denom = np.sqrt(v_max) / np.sqrt(1 - b2 ** t) + eps
        want -= lr / (1 - b1 ** t) * m / denom
        # f32 state over a few steps of size ~lr.
        np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-5,
                                   atol=1e-6)


def test_lambda_lr_and_reduce_on_plateau():
    opt = _sgd(0.1)
    sched = mixrt.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
    sched.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.025
    opt = _sgd(0.1)
    plateau = mixrt.optim.lr_scheduler.ReduceLROnPlateau(
        opt, factor=0.5, patience=1, min_lr=0.03)
    for metric in (1.0, 1.0, 1.0, 1.0, 1.0):
        plateau.step(metric)
    # Bad epochs 2 and 4 pass the patience of 1: 0.1 -> 0.05 -> 0.03 (floor).
    assert plateau.get_last_lr() == [0.03]
    with pytest.raises(ValueError, match="mode 'up'"):
        mixrt.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="up")


def test_cross_entropy_weights_probabilities_and_positions():
    # PyTorch 2.15's values (float64) for the same inputs; mixrt in f32
    # through log_softmax, products, sums and a division: 1e-5.
    logits = mixrt.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5],
                           [-2.0, 0.0, 1.0], [0.3, 0.7, -0.1]])
    target = mixrt.tensor([2, 1, 0, 1], dtype=mixrt.int64)
    w = mixrt.tensor([0.5, 2.0, 1.5])
    loss = F.cross_entropy(logits, target, weight=w, ignore_index=1,
                           label_smoothing=0.2)
    assert abs(loss.item() - 1.2349656898046442) < 1e-5
    probs = mixrt.tensor([[0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 0.0],
                          [0.25, 0.25, 0.25, 0.25]])
    q = mixrt.tensor([[1.0, -1.0, 0.5, 0.0], [0.2, 0.1, -0.3, 2.0],
                      [-1.0, -2.0, 0.0, 1.0]])
    loss = F.cross_entropy(q, probs, weight=mixrt.tensor([1.0, 0.5, 2.0, 1.0]),
                           label_smoothing=0.1)
    assert abs(loss.item() - 1.6265184887690556) < 1e-5
    x = mixrt.tensor([[[0.5, 1.0], [-1.0, 0.0], [2.0, 0.5]],
                      [[1.5, -0.5], [0.25, 0.75], [-0.5, 0.0]]])
    t = mixrt.tensor([[2, 0], [1, 1]], dtype=mixrt.int64)
    per = F.cross_entropy(x, t, reduction="none")
    assert tuple(per.shape) == (2, 2)
    np.testing.assert_allclose(
        per.numpy(), [[0.24131129665715703, 0.6802696706417346],
                      [1.6019518638028019, 0.5646723247072887]], atol=1e-5)


def test_clip_grad_norm():
    p = nn.Parameter(mixrt.zeros(2))
    (p * mixrt.tensor([3.0, 4.0])).sum().backward()
    total = nn.utils.clip_grad_norm_([p], 1.0)
    assert abs(float(total) - 5.0) < 1e-6
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_clip_grad_norm_orders_and_nonfinite_norms():
    # Against NumPy's vector norms of the same gradient {3, -4}.
    for order in (1.0, 3.0, float("inf"), "inf"):
        p = nn.Parameter(mixrt.zeros(2))
        (p * mixrt.tensor([3.0, -4.0])).sum().backward()
        want = np.linalg.norm(np.array([3.0, -4.0]), ord=float(order))
        total = nn.utils.clip_grad_norm_([p], 1.0, norm_type=order)
        assert abs(float(total) - want) < want * 1e-6, order
        np.testing.assert_allclose(p.grad.numpy(),
                                   np.array([3.0, -4.0]) / (want + 1e-6),
                                   rtol=1e-5)
    p = nn.Parameter(mixrt.zeros(2))
    (p * mixrt.tensor([float("nan"), 1.0])).sum().backward()
    with pytest.raises(RuntimeError, match="cannot be clipped"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert np.isnan(p.grad.numpy()[0]) and p.grad.numpy()[1] == 1.0
    with pytest.raises(ValueError, match="norm_type"):
        nn.utils.clip_grad_norm_([p], 1.0, norm_type=-1)


def test_checkpointed_function_gives_the_same_gradients():
    lin = nn.Linear(4, 4)
    x = mixrt.randn(3, 4, requires_grad=True)

    def block(t):
        return F.gelu(lin(t))

    block(x).sum().backward()
    plain_w = lin.weight.grad.detach().numpy().copy()
    plain_x = x.grad.detach().numpy().copy()
    lin.zero_grad()
    x.grad = None
    mixrt.utils.checkpoint.checkpoint(block, x).sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), plain_w, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), plain_x, rtol=1e-6)


def test_non_reentrant_checkpoint_trains_parameters_behind_data():
    # Data in, a Linear inside: use_reentrant=False (the default) gives the
    # weight the gradient an uncheckpointed run gives; True gives none.
    lin = nn.Linear(4, 4)
    x = mixrt.randn(3, 4)  # No requires_grad: data.

    def block(t):
        return F.gelu(lin(t))

    block(x).sum().backward()
    plain_w = lin.weight.grad.detach().numpy().copy()
    lin.zero_grad()
    mixrt.utils.checkpoint.checkpoint(block, x).sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), plain_w, rtol=1e-6)
    lin.zero_grad()
    out = mixrt.utils.checkpoint.checkpoint(block, x, use_reentrant=True)
    assert not out.requires_grad
    assert lin.weight.grad is None


def test_gpt_trains_and_its_parameters_are_the_cores():
    gpt = nn.GPT(vocab_size=16, context=8, width=32, heads=4, layers=2)
    names = [n for n, _ in gpt.named_parameters()]
    assert "wte.weight" in names and any(n.startswith("h.1.") for n in names)
    tokens = mixrt.tensor([[1, 2, 3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3, 2, 1]])
    assert gpt(tokens).shape == (2, 8, 16)
    opt = mixrt.optim.AdamW(gpt.parameters(), lr=3e-3)
    targets = mixrt.tensor([[2, 3, 4, 5, 6, 7, 8, 9], [7, 6, 5, 4, 3, 2, 1, 0]])
    losses = []
    for _ in range(15):
        opt.zero_grad()
        logits = gpt(tokens)
        loss = F.cross_entropy(logits.reshape(16, 16), targets.reshape(16))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    # state_dict round trip into a second model gives the same logits.
    other = nn.GPT(vocab_size=16, context=8, width=32, heads=4, layers=2)
    other.load_state_dict(gpt.state_dict())
    np.testing.assert_array_equal(other(tokens).detach().numpy(),
                                  gpt(tokens).detach().numpy())


def test_multihead_attention_is_self_attention_batch_first_or_not():
    mha = nn.MultiheadAttention(16, 2, batch_first=True)
    x = mixrt.randn(3, 5, 16)
    out, weights = mha(x, x, x)
    assert out.shape == (3, 5, 16) and weights is None
    seq_first = nn.MultiheadAttention(16, 2)
    seq_first.load_state_dict(mha.state_dict())
    out2, _ = seq_first(x.transpose(0, 1))
    np.testing.assert_allclose(out2.transpose(0, 1).detach().numpy(),
                               out.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError):
        mha(x, mixrt.randn(3, 5, 16), x)
