"""mixrt.compile on Python functions and modules: results equal eager's,
replays run no Python, and Python values the function reads are guarded
(a change traces again; it never replays a stale value)."""

import itertools
import types

import numpy as np
import pytest

import mixrt
from mixrt import nn
from mixrt.nn import functional as F

SCALE = 2.0


def scaled(x):
    return F.relu(x) * SCALE


def test_compiled_function_equals_eager_and_replays():
    # A counter the guards see as the same object every call (a list it
    # appended to would be a changed Python value, traced again).
    calls = itertools.count()

    def f(x, y):
        next(calls)
        return F.gelu(x @ y) + 1.0

    cf = mixrt.compile(f)
    x, y = mixrt.randn(4, 8), mixrt.randn(8, 3)
    eager = f(x, y).numpy()
    for _ in range(4):
        # The compiled graph fuses matmul, GELU and the add (one oneDNN
        # kernel); eager rounds between them: a few float32 ulps apart.
        np.testing.assert_allclose(cf(x, y).numpy(), eager, rtol=1e-5,
                                   atol=1e-6)
    assert cf.replays >= 2
    # Replays run no Python: the eager call, the trace, and (mixrt checks
    # a new graph once against eager) at most one more.
    assert next(calls) <= 3


def test_a_changed_global_traces_again():
    global SCALE
    cf = mixrt.compile(scaled)
    x = mixrt.tensor([1.0, -1.0, 3.0])
    assert cf(x).tolist() == [2.0, 0.0, 6.0]
    assert cf(x).tolist() == [2.0, 0.0, 6.0]
    SCALE = 10.0
    try:
        assert cf(x).tolist() == [10.0, 0.0, 30.0]
    finally:
        SCALE = 2.0


# A configuration module, as `import cfg` gives one (the probe's case).
_CFG = types.ModuleType("cfg")
_CFG.alpha = 1.5


def _times_cfg_alpha(x):
    return x * _CFG.alpha


def test_an_imported_modules_attribute_is_guarded():
    cf = mixrt.compile(_times_cfg_alpha)
    x = mixrt.tensor([1.0, 2.0])
    assert cf(x).tolist() == [1.5, 3.0]
    assert cf(x).tolist() == [1.5, 3.0]
    _CFG.alpha = 4.0
    try:
        assert cf(x).tolist() == [4.0, 8.0]  # Replayed x1.5 before.
    finally:
        _CFG.alpha = 1.5
    # A module held in a closure cell, the same.
    settings = types.ModuleType("settings")
    settings.shift = 1.0
    shifted = mixrt.compile(lambda x: x + settings.shift)
    assert shifted(x).tolist() == [2.0, 3.0]
    assert shifted(x).tolist() == [2.0, 3.0]
    settings.shift = -1.0
    assert shifted(x).tolist() == [0.0, 1.0]


def test_a_numpy_array_read_inside_is_guarded_by_its_contents():
    arr = np.array([2.0, 0.0], dtype=np.float32)
    cf = mixrt.compile(lambda x: x * float(arr[0]))
    x = mixrt.tensor([1.0, 3.0])
    assert cf(x).tolist() == [2.0, 6.0]
    assert cf(x).tolist() == [2.0, 6.0]
    arr[0] = 7.0  # In place: the same array object.
    assert cf(x).tolist() == [7.0, 21.0]


def test_a_changed_closure_value_and_argument_trace_again():
    factor = [3.0]

    def make():
        k = factor[0]
        return lambda x, p: x * k + p

    cf = mixrt.compile(make())
    x = mixrt.ones(2)
    assert cf(x, 1.0).tolist() == [4.0, 4.0]
    assert cf(x, 2.0).tolist() == [5.0, 5.0]  # A number argument changed.


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)
        self.gain = 1.0

    def forward(self, x):
        return self.drop(F.relu(self.fc(x))) * self.gain


def test_compiled_module_matches_eager_and_follows_train_eval_and_attributes():
    net = Net().eval()
    compiled = mixrt.compile(net)
    x = mixrt.randn(3, 4)
    eager = net(x).detach().numpy()
    np.testing.assert_array_equal(compiled(x).detach().numpy(), eager)
    np.testing.assert_array_equal(compiled(x).detach().numpy(), eager)
    net.gain = 3.0
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager * 3,
                               rtol=1e-6)
    net.fc.weight = nn.Parameter(mixrt.zeros(4, 4))  # Another tensor.
    np.testing.assert_array_equal(
        compiled(x).detach().numpy(),
        np.maximum(net.fc.bias.detach().numpy(), 0)[None, :].repeat(3, 0) * 3)
    assert compiled.parameters is not None  # The module's attributes.


def test_compiled_training_step_equals_eager():
    def run(compiled):
        mixrt.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = mixrt.optim.SGD(model.parameters(), lr=0.1)
        x, y = mixrt.randn(32, 8), mixrt.randn(32, 1)

        def loss_fn(x, y):
            return F.mse_loss(model(x), y)

        step = mixrt.compile(loss_fn) if compiled else loss_fn
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = step(x, y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    np.testing.assert_allclose(run(True), run(False), rtol=1e-6)


def test_decorator_forms_and_modes():
    @mixrt.compile(mode="reduce-overhead")
    def f(x):
        return x * 2

    assert f(mixrt.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        mixrt.compile(lambda x: x, mode="fastest")


def test_python_exceptions_come_back_out():
    def bad(x):
        raise KeyError("from inside")

    with pytest.raises(KeyError, match="from inside"):
        mixrt.compile(bad)(mixrt.ones(1))


def test_non_tensor_results_are_refused():
    with pytest.raises((ValueError, TypeError)):
        mixrt.compile(lambda x: 3)(mixrt.ones(1))


def test_an_in_place_update_of_a_weight_is_seen_by_a_compiled_function():
    w = mixrt.ones(4, 4)

    @mixrt.compile
    def f(x):
        return x @ (w * 2.0)  # A launch on the constant alone: kept.

    x = mixrt.ones(1, 4)
    assert f(x).tolist() == [[8.0] * 4]
    assert f(x).tolist() == [[8.0] * 4]
    w += 1.0  # Written through the core: its version moves.
    assert f(x).tolist() == [[16.0] * 4]


def _helper(x):
    return x * 2.0


def _uses_helper(x):
    return _helper(x) + 1.0


def test_a_replaced_global_function_traces_again():
    global _helper
    cf = mixrt.compile(_uses_helper)
    x = mixrt.ones(2)
    assert cf(x).tolist() == [3.0, 3.0]
    assert cf(x).tolist() == [3.0, 3.0]
    original = _helper
    _helper = lambda t: t * 5.0  # noqa: E731
    try:
        assert cf(x).tolist() == [6.0, 6.0]
    finally:
        _helper = original


def test_dropout_is_compiled_and_draws_as_eager():
    # Random numbers are traced with the generator's state as an input:
    # every call draws new masks, the ones eager draws from the same seed.
    def run(compiled):
        mixrt.manual_seed(3)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.5),
                              nn.Linear(16, 1))
        step = mixrt.compile(model) if compiled else model
        x = mixrt.randn(32, 8)
        outs = []
        for _ in range(3):
            y = step(x)
            y.sum().backward()
            outs.append(y.detach().numpy())
        grads = [p.grad.numpy() for p in model.parameters()]
        return outs, grads, step

    eager_outs, eager_grads, _ = run(False)
    outs, grads, compiled = run(True)
    for a, b in zip(outs + grads, eager_outs + eager_grads):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(outs[0], outs[1])
    assert "graph break" not in compiled.explain()


def test_fullgraph_captures_item_guarding_its_value():
    def f(x):
        s = x.sum().item()
        return x * (2.0 if s > 0 else -2.0)

    cf = mixrt.compile(f, fullgraph=True)
    for v in (1.0, 1.0, -1.0, 2.0):
        x = mixrt.full((3,), v)
        assert cf(x).tolist() == f(x).tolist()


# The guards of a compiled call of Tensors only run in C++
# (_mixrt._GuardedCall); these changes must each still trace again.

def test_reassigned_defaults_trace_again():
    def f(x, k=2.0):
        return x * k

    cf = mixrt.compile(f)
    x = mixrt.ones(2)
    assert cf(x).tolist() == [2.0, 2.0]
    assert cf(x).tolist() == [2.0, 2.0]
    f.__defaults__ = (5.0,)
    assert cf(x).tolist() == [5.0, 5.0]
    f.__kwdefaults__ = {"unused": 1}
    f.__defaults__ = (7.0,)
    assert cf(x).tolist() == [7.0, 7.0]


def test_a_mutated_default_list_traces_again():
    def f(x, k=[2.0]):  # noqa: B006 (the mutable default is the point)
        return x * k[0]

    cf = mixrt.compile(f)
    x = mixrt.ones(2)
    assert cf(x).tolist() == [2.0, 2.0]
    assert cf(x).tolist() == [2.0, 2.0]
    f.__defaults__[0][0] = 4.0
    assert cf(x).tolist() == [4.0, 4.0]


def test_a_rebound_closure_function_traces_again():
    act = F.relu

    def set_act(fn):
        nonlocal act
        act = fn

    def f(x):
        return act(x) + 1.0

    cf = mixrt.compile(f)
    x = mixrt.tensor([-1.0, 2.0])
    assert cf(x).tolist() == [1.0, 3.0]
    assert cf(x).tolist() == [1.0, 3.0]
    set_act(lambda t: t * 2.0)
    assert cf(x).tolist() == [-1.0, 5.0]


def test_a_module_attribute_change_is_seen_by_the_c_guards():
    net = Net().eval()
    cf = mixrt.compile(lambda x: net(x).sum())
    x = mixrt.randn(3, 4)
    first = cf(x).item()
    assert cf(x).item() == first
    net.gain = 2.0
    assert cf(x).item() == pytest.approx(2 * first, rel=1e-6)


def test_calls_of_tensors_replay_without_the_python_guard_path(monkeypatch):
    def f(x, y):
        return F.relu(x) + y

    cf = mixrt.compile(f)
    x, y = mixrt.randn(4), mixrt.randn(4)
    cf(x, y)
    slow = []
    original = type(cf)._last_valid
    monkeypatch.setattr(type(cf), "_last_valid",
                        lambda self, *a: slow.append(1) or original(self, *a))
    for _ in range(5):
        np.testing.assert_allclose(cf(x, y).numpy(),
                                   np.maximum(x.numpy(), 0) + y.numpy(),
                                   rtol=1e-6)
    assert slow == []
    # A new number argument takes the Python path (and traces); the same
    # number again does not.
    np.testing.assert_allclose(cf(x, 1.0).numpy(),
                               np.maximum(x.numpy(), 0) + 1.0, rtol=1e-6)
    assert slow == [1]
    for _ in range(3):
        np.testing.assert_allclose(cf(x, 1.0).numpy(),
                                   np.maximum(x.numpy(), 0) + 1.0, rtol=1e-6)
    assert slow == [1]


def test_a_changed_number_argument_is_never_replayed_stale():
    def f(x, k, flag):
        return x * k if flag else x + k

    cf = mixrt.compile(f)
    x = mixrt.tensor([1.0, 2.0])
    for k, flag, want in [(2.0, True, [2.0, 4.0]), (2.0, True, [2.0, 4.0]),
                          (3.0, True, [3.0, 6.0]), (3.0, 1, [3.0, 6.0]),
                          (3.0, False, [4.0, 5.0]), (3.0, 0, [4.0, 5.0]),
                          (3, 0, [4.0, 5.0]), (3.0, True, [3.0, 6.0])]:
        assert cf(x, k, flag).tolist() == want, (k, flag)
    # Each (type, value) seen is a variant of its own: True and 1, 3.0 and 3.
    assert len(cf._variants) == 6


def test_a_compiled_function_is_collected_with_its_guards():
    import gc
    import weakref

    # The function's globals hold the compiled function, whose C++ guards
    # hold those globals: a cycle only the collector can free.
    space = {"F": F}
    exec("def f(x):\n    return F.relu(x)\n", space)
    cf = mixrt.compile(space["f"])
    space["cf"] = cf
    cf(mixrt.ones(2))
    cf(mixrt.ones(2))
    gone = weakref.ref(cf)
    del cf, space
    gc.collect()
    assert gone() is None


def test_guarded_call_refuses_malformed_guards():
    cf = mixrt.compile(lambda x: x + 1.0)
    cf(mixrt.ones(1))
    variant = next(iter(cf._variants.values()))
    from mixrt import _mixrt
    with pytest.raises(TypeError, match="identity guard"):
        _mixrt._GuardedCall(variant, 1, [], [0], 0, [("item", {})], [])
    with pytest.raises(TypeError, match="unknown kind"):
        _mixrt._GuardedCall(variant, 1, [], [0], 0, [("glob", {}, "a", 1)],
                            [])
    with pytest.raises(TypeError, match="dict"):
        _mixrt._GuardedCall(variant, 1, [], [0], 0, [("item", [], "a", 1)],
                            [])
    with pytest.raises(TypeError, match="probe"):
        _mixrt._GuardedCall(variant, 1, [], [0], 0, [], [(1, 2)])
    with pytest.raises(TypeError, match="one-item list"):
        _mixrt._GuardedCall(variant, 1, [], [], 0, [], [])
    with pytest.raises(TypeError, match="constant"):
        _mixrt._GuardedCall(variant, 2, [(1,)], [0], 0, [], [])
    with pytest.raises(ValueError, match="below the arity"):
        _mixrt._GuardedCall(variant, 2, [(2, 1.0)], [0], 0, [], [])
    with pytest.raises(TypeError, match="what _compile returned"):
        _mixrt._GuardedCall(types.SimpleNamespace(compiled=1.0), 1, [], [0],
                            0, [], [])
    with pytest.raises(ValueError, match="increase"):
        _mixrt._GuardedCall(variant, 3, [(1, 1.0), (1, 2.0)], [0], 0, [],
                            [])


def test_a_compiled_backward_reads_an_input_that_is_a_view_at_an_offset():
    # A batch shard (x[8:16] of one tensor, as DDP ranks take theirs): the
    # compiled backward read the saved input that many elements too far,
    # past its storage, and gave garbage weight gradients with no error.
    mixrt.manual_seed(0)
    full = mixrt.randn(16, 16)
    x, y = full[8:16], mixrt.randn(8, 32)

    def weight_grad(compiled):
        mixrt.manual_seed(1)
        m = nn.Linear(16, 32)
        f = lambda x, y: F.mse_loss(m(x), y)  # noqa: E731
        if compiled:
            f = mixrt.compile(f)
        grads = []
        for _ in range(2):  # The first call captures, the second replays.
            m.zero_grad()
            f(x, y).backward()
            grads.append(m.weight.grad.numpy().copy())
        return grads

    for eager, compiled in zip(weight_grad(False), weight_grad(True)):
        # The same kernels in the same order: equal bit for bit.
        np.testing.assert_array_equal(compiled, eager)
