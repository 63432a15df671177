"""Bad input raises the exception PyTorch raises for it, with a message
naming what was wrong; it never crashes the interpreter."""

import os

import numpy as np
import pytest

import mixrt
from mixrt import nn
from mixrt.nn import functional as F


def test_wrong_types_raise_type_error():
    t = mixrt.ones(2)
    with pytest.raises(TypeError):
        t + "a"
    with pytest.raises(TypeError):
        mixrt.zeros("3")
    with pytest.raises(TypeError):
        F.linear(t, [[1.0]])
    with pytest.raises(TypeError):
        mixrt.optim.SGD([1.0, 2.0])
    with pytest.raises(TypeError):
        mixrt.save([t], "x.mixrt")


def test_wrong_shapes_and_values_raise_value_or_runtime_errors():
    with pytest.raises((ValueError, RuntimeError), match="shape|size|dim"):
        F.linear(mixrt.ones(2, 3), mixrt.ones(4, 5))
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(mixrt.ones(2), mixrt.ones(2), reduction="average")
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError):
        mixrt.optim.SGD(nn.Linear(2, 2).parameters(), lr=-1.0)
    with pytest.raises(ValueError, match="empty parameter list"):
        mixrt.optim.AdamW([])


def test_wrong_dtypes_are_named():
    with pytest.raises((ValueError, RuntimeError)):
        F.cross_entropy(mixrt.randn(2, 3), mixrt.tensor([0.5, 1.5]))
    with pytest.raises((ValueError, RuntimeError)):
        F.embedding(mixrt.tensor([0.5]), mixrt.randn(4, 2))


def test_indexing_errors():
    t = mixrt.ones(2, 3)
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(IndexError):
        t[:, -4]
    with pytest.raises(IndexError):
        t.size(3)


def test_files_that_are_not_checkpoints(tmp_path):
    with pytest.raises(Exception) as raised:
        mixrt.load(tmp_path / "missing.mixrt")
    assert "missing.mixrt" in str(raised.value)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Exception):  # Refused, not a hang on the FIFO.
        mixrt.load(fifo)
    with pytest.raises(TypeError, match="file path"):
        with open(tmp_path / "f", "wb") as f:
            mixrt.save({"a": mixrt.ones(1)}, f)


def test_non_contiguous_numpy_arrays_are_copied_or_shared_correctly():
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T  # Fortran order.
    np.testing.assert_array_equal(mixrt.tensor(a).numpy(), a)
    np.testing.assert_array_equal(mixrt.from_numpy(a).numpy(), a)
    with pytest.raises(ValueError, match="negative strides"):
        mixrt.from_numpy(np.arange(4, dtype=np.float32)[::-1])


def test_backward_on_a_non_scalar_without_gradient():
    x = mixrt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward(retain_graph=True)
    with pytest.raises(RuntimeError):
        mixrt.ones(2).backward()


def test_in_place_write_to_a_leaf_that_requires_grad():
    p = nn.Parameter(mixrt.ones(2))
    with pytest.raises(RuntimeError, match="leaf Variable"):
        p.copy_(mixrt.zeros(2))
