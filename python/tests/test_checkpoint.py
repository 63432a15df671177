"""torch.save-shaped checkpoints: optimizers' state_dict in PyTorch's form,
and mixrt.save / mixrt.load of nested dicts ({"model": ..., "optimizer":
..., "epoch": ...}) that come back exactly, with every malformed or hostile
structure refused."""

import numpy as np
import pytest

import mixrt
from mixrt import nn
from mixrt.nn import functional as F

def model_and_data():
    mixrt.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x, y = mixrt.randn(5, 4), mixrt.randn(5, 2)
    return model, x, y

def train(model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()

def test_sgd_state_dict_has_pytorchs_form():
    model, x, y = model_and_data()
    opt = mixrt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, x, y, 2)
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert sorted(sd["state"]) == [0, 1, 2, 3]
    assert list(sd["state"][0]) == ["momentum_buffer"]
    assert sd["state"][2]["momentum_buffer"].shape == (2, 8)
    (group,) = sd["param_groups"]
    assert group["params"] == [0, 1, 2, 3]
    assert group["lr"] == pytest.approx(0.1)
    assert group["momentum"] == pytest.approx(0.9)
    assert group["nesterov"] is False

def test_adamw_state_dict_names_match_pytorchs():
    model, x, y = model_and_data()
    opt = mixrt.optim.AdamW(model.parameters(), lr=0.01, amsgrad=True)
    train(model, opt, x, y, 3)
    entry = opt.state_dict()["state"][1]
    assert sorted(entry) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert float(entry["step"].item()) == 3.0
    assert opt.state_dict()["param_groups"][0]["betas"] == (0.9, 0.999)

@pytest.mark.parametrize("make", [
    lambda p: mixrt.optim.SGD(p, lr=0.05, momentum=0.9),
    lambda p: mixrt.optim.AdamW(p, lr=0.01),
])
def test_resuming_from_a_nested_checkpoint_continues_bit_for_bit(tmp_path,
                                                                 make):
    model, x, y = model_and_data()
    opt = make(model.parameters())
    train(model, opt, x, y, 3)
    path = tmp_path / "ckpt.mixrt"
    mixrt.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "epoch": 3}, path)
    train(model, opt, x, y, 2)  # The uninterrupted run.

    resumed, _, _ = model_and_data()
    resumed_opt = make(resumed.parameters())
    ckpt = mixrt.load(path)
    assert ckpt["epoch"] == 3
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["optimizer"])
    train(resumed, resumed_opt, x, y, 2)
    for (name, want), got in zip(model.state_dict().items(),
                                 resumed.state_dict().values()):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)

def test_load_state_dict_restores_the_learning_rate():
    model, x, y = model_and_data()
    opt = mixrt.optim.SGD(model.parameters(), lr=0.1)
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.025
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)

def test_the_earlier_flat_state_still_loads():
    model, x, y = model_and_data()
    opt = mixrt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, x, y, 1)
    flat = {f"{i}.{name}": t for i, entry in opt.state_dict()["state"].items()
            for name, t in entry.items()}
    fresh = mixrt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    fresh.load_state_dict(flat)
    np.testing.assert_array_equal(
        fresh.state_dict()["state"][0]["momentum_buffer"].numpy(),
        flat["0.momentum_buffer"].numpy())

def test_mismatched_state_dicts_are_refused_before_anything_changes():
    model, x, y = model_and_data()
    opt = mixrt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, x, y, 1)
    sd = opt.state_dict()
    before = sd["state"][0]["momentum_buffer"].numpy().copy()
    other = mixrt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                            weight_decay=0.5)
    with pytest.raises(ValueError, match="'weight_decay' is 0.5 in the state"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="different number of parameter"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict({"state": {}, "param_groups": [
            dict(sd["param_groups"][0], params=[0, 1])]})
    with pytest.raises(TypeError, match="int parameter indices"):
        opt.load_state_dict({"state": {"0": {}},
                             "param_groups": sd["param_groups"]})
    wrong = {0: {"momentum_buffer": mixrt.zeros(3)}}
    with pytest.raises(Exception, match="expected f32"):
        opt.load_state_dict({"state": wrong,
                             "param_groups": sd["param_groups"]})
    np.testing.assert_array_equal(
        opt.state_dict()["state"][0]["momentum_buffer"].numpy(), before)

def test_nested_checkpoints_come_back_exactly(tmp_path):
    w = mixrt.randn(3, 2)
    obj = {"model": {"fc.weight": w, "fc.bias": mixrt.zeros(2)},
           "state": {0: {"step": mixrt.tensor(4.0)}, 7: {}},
           "betas": (0.9, 0.999), "milestones": [1, 2], "epoch": 12,
           "loss": 0.25, "best": None, "note": "run a/b", "done": False,
           "nan": float("nan")}
    path = tmp_path / "nested.mixrt"
    mixrt.save(obj, path)
    got = mixrt.load(path)
    assert list(got) == list(obj)
    assert list(got["state"]) == [0, 7] and got["state"][7] == {}
    assert got["betas"] == (0.9, 0.999) and isinstance(got["betas"], tuple)
    assert got["milestones"] == [1, 2] and got["epoch"] == 12
    assert got["best"] is None and got["note"] == "run a/b"
    assert got["done"] is False and np.isnan(got["nan"])
    np.testing.assert_array_equal(got["model"]["fc.weight"].numpy(),
                                  w.numpy())
    assert float(got["state"][0]["step"].item()) == 4.0
    # A tensor named like the structure entry keeps its own name's place.
    mixrt.save({"__mixrt_structure_v1__": w, "n": [1]}, path)
    np.testing.assert_array_equal(
        mixrt.load(path)["__mixrt_structure_v1__"].numpy(), w.numpy())
    # A flat dict of tensors and numbers is stored as before.
    mixrt.save({"w": w, "n": 3}, path)
    assert sorted(mixrt.load(path)) == ["n", "w"]

def test_what_a_checkpoint_cannot_hold_is_refused_by_path(tmp_path):
    path = tmp_path / "bad.mixrt"
    with pytest.raises(TypeError, match="optimizer/extra is a set"):
        mixrt.save({"optimizer": {"extra": {1, 2}}}, path)
    with pytest.raises(TypeError, match="key of type tuple"):
        mixrt.save({"a": {(1, 2): 3}}, path)
    deep = {}
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ValueError, match="nests deeper"):
        mixrt.save(deep, path)
    assert not path.exists()

def structure_file(tmp_path, text):
    """A checkpoint whose structure entry holds `text`, written through the
    core's own (valid, checksummed) format, as a hostile file could be."""
    path = tmp_path / "hostile.mixrt"
    data = list(text.encode())
    mixrt._mixrt._save({"__mixrt_structure_v1__": mixrt.tensor(
        data, dtype=mixrt.int32), "x": mixrt.ones(1)}, str(path))
    return path

@pytest.mark.parametrize("text, why", [
    ("{not json", "not valid JSON"),
    ('{"t": "missing"}', "malformed"),
    ('{"d": [[1]]}', "malformed"),
    ('{"d": [[true, 1]]}', "malformed"),
    ('{"q": []}', "malformed"),
    ('{"l": 5}', "malformed"),
    ("[" * 100000 + "]" * 100000, "JSON|deep"),
    ('{"l": [' * 200 + "1" + "]}" * 200, "deep"),
], ids=["not-json", "missing-tensor", "short-item", "bool-key",
        "unknown-kind", "list-not-a-list", "json-too-deep", "too-deep"])
def test_a_malformed_structure_is_refused(tmp_path, text, why):
    with pytest.raises(ValueError, match=why):
        mixrt.load(structure_file(tmp_path, text))

def test_a_structure_that_is_not_a_vector_is_refused(tmp_path):
    path = tmp_path / "hostile.mixrt"
    mixrt._mixrt._save({"__mixrt_structure_v1__": mixrt.ones(2, 2)},
                       str(path))
    with pytest.raises(ValueError, match="not a 1-D tensor"):
        mixrt.load(path)
    mixrt._mixrt._save({"__mixrt_structure_v1__": 3}, str(path))
    with pytest.raises(ValueError, match="not a 1-D tensor"):
        mixrt.load(path)
