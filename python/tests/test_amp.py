"""autocast and GradScaler from Python: the core's AMP (PyTorch's
semantics) reached through the context manager, the decorator and the
scaler's methods, with PyTorch's errors."""

import math

import numpy as np
import pytest

import mixrt


def test_autocast_runs_matmul_in_bfloat16_and_restores_after():
    a, b = mixrt.randn(4, 8), mixrt.randn(8, 3)
    with mixrt.autocast("cpu", dtype=mixrt.bfloat16):
        assert mixrt.is_autocast_enabled("cpu")
        assert mixrt.get_autocast_dtype("cpu") == mixrt.bfloat16
        out = a @ b
        assert out.dtype == mixrt.bfloat16
        # mse_loss is on CPU autocast's float32 list (softmax is not).
        assert mixrt.nn.functional.mse_loss(out, out).dtype == mixrt.float32
        assert mixrt.nn.functional.softmax(out, -1).dtype == mixrt.bfloat16
    assert not mixrt.is_autocast_enabled("cpu")
    assert (a @ b).dtype == mixrt.float32
    # bf16 inputs, f32 accumulation: within bf16's rounding of the inputs.
    ref = a.numpy() @ b.numpy()
    np.testing.assert_allclose(out.to(mixrt.float32).numpy(), ref,
                               rtol=2e-2, atol=5e-2)


def test_autocast_decorator_and_disabled_region():
    @mixrt.autocast("cpu", dtype=mixrt.bfloat16)
    def f(x, y):
        return x @ y

    a = mixrt.randn(2, 2)
    assert f(a, a).dtype == mixrt.bfloat16
    with mixrt.autocast("cpu", dtype=mixrt.bfloat16):
        with mixrt.autocast("cpu", enabled=False):
            assert (a @ a).dtype == mixrt.float32


def test_autocast_rejects_bad_arguments():
    with pytest.raises(ValueError):
        mixrt.autocast(3)
    with pytest.raises(TypeError):
        mixrt.autocast("cpu", dtype="bf16")


def _model_and_optimizer():
    model = mixrt.nn.Linear(4, 1)
    opt = mixrt.optim.SGD(model.parameters(), lr=0.1)
    return model, opt


def test_grad_scaler_scales_steps_and_grows():
    model, opt = _model_and_optimizer()
    scaler = mixrt.amp.GradScaler(init_scale=4.0, growth_interval=1)
    x, y = mixrt.randn(8, 4), mixrt.randn(8, 1)
    before = model.weight.tolist()
    loss = mixrt.nn.functional.mse_loss(model(x), y)
    scaled = scaler.scale(loss)
    assert math.isclose(scaled.item(), loss.item() * 4.0, rel_tol=1e-6)
    scaled.backward()
    scaler.step(opt)
    scaler.update()
    assert not scaler.last_step_skipped()
    assert model.weight.tolist() != before
    assert scaler.get_scale() == 8.0  # Grew after one clean step.


def test_grad_scaler_skips_a_step_with_inf_and_backs_off():
    model, opt = _model_and_optimizer()
    scaler = mixrt.amp.GradScaler(init_scale=2.0**16)
    before = model.weight.tolist()
    x = mixrt.tensor([[1e30, 1e30, 1e30, 1e30]])
    loss = (model(x) * 1e30).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.last_step_skipped()
    assert model.weight.tolist() == before
    assert scaler.get_scale() == 2.0**15


def test_grad_scaler_errors_match_pytorch():
    model, opt = _model_and_optimizer()
    scaler = mixrt.amp.GradScaler()
    loss = mixrt.nn.functional.mse_loss(model(mixrt.randn(2, 4)),
                                        mixrt.randn(2, 1))
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_"):
        scaler.unscale_(opt)


def test_grad_scaler_state_dict_has_pytorchs_keys_and_types(tmp_path):
    scaler = mixrt.amp.GradScaler(init_scale=1024.0, growth_interval=3)
    state = scaler.state_dict()
    # PyTorch 2.15: {'scale': 1024.0, 'growth_factor': 2.0,
    # 'backoff_factor': 0.5, 'growth_interval': 3, '_growth_tracker': 0}.
    assert state == {"scale": 1024.0, "growth_factor": 2.0,
                     "backoff_factor": 0.5, "growth_interval": 3,
                     "_growth_tracker": 0}
    assert type(state["growth_interval"]) is int
    assert type(state["_growth_tracker"]) is int
    path = tmp_path / "scaler.mixrt"
    mixrt.save({"scaler": state}, path)
    other = mixrt.amp.GradScaler()
    other.load_state_dict(mixrt.load(path)["scaler"])
    assert other.state_dict() == state
