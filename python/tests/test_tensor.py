"""Tensors against NumPy: creation, factories, operators, indexing as
views, dtypes, autograd. Float32 results of one rounding (add, mul) are
exact against NumPy's float32; matmul and reductions sum in another order
(rtol 1e-5 for float32's 2^-24 per step over short sums)."""

import numpy as np
import pytest

import mixrt


def test_tensor_from_nested_lists_keeps_shape_values_and_dtype():
    t = mixrt.tensor([[1.5, 2.0, -3.0], [4.0, 5.0, 6.25]])
    assert t.shape == (2, 3)
    assert t.dtype == mixrt.float32
    assert t.tolist() == [[1.5, 2.0, -3.0], [4.0, 5.0, 6.25]]
    assert mixrt.tensor([1, 2, 3]).dtype == mixrt.int64
    assert mixrt.tensor([True, False]).dtype == mixrt.bool
    assert mixrt.tensor(3.5).shape == ()
    assert mixrt.tensor(3.5).item() == 3.5


def test_ragged_lists_and_bad_data_are_refused():
    with pytest.raises(ValueError, match="expected sequence of length"):
        mixrt.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        mixrt.tensor("not numbers")
    with pytest.raises(TypeError):
        mixrt.tensor([1.0], dtype="float32")


def test_tensor_from_numpy_copies_and_converts():
    a = np.arange(12, dtype=np.float64).reshape(3, 4) / 7
    t = mixrt.tensor(a)
    assert t.dtype == mixrt.float32
    np.testing.assert_array_equal(t.numpy(), a.astype(np.float32))
    a[0, 0] = 100  # A copy: the tensor does not change.
    assert t[0, 0].item() == 0.0
    i = mixrt.tensor(np.array([[1, -2]], dtype=np.int32))
    assert i.dtype == mixrt.int32 and i.tolist() == [[1, -2]]


def test_factories():
    assert mixrt.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert mixrt.ones((2,), dtype=mixrt.int32).tolist() == [1, 1]
    assert mixrt.full((2, 2), 7).dtype == mixrt.int64
    assert mixrt.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert mixrt.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    r = mixrt.randn(1000).numpy()
    assert abs(r.mean()) < 0.15 and 0.85 < r.std() < 1.15
    u = mixrt.rand(1000).numpy()
    assert u.min() >= 0 and u.max() < 1
    with pytest.raises(TypeError):
        mixrt.zeros(2.5)


def test_same_seed_same_numbers():
    mixrt.manual_seed(123)
    a = mixrt.randn(8).tolist()
    mixrt.manual_seed(123)
    assert mixrt.randn(8).tolist() == a


def test_arithmetic_matches_numpy_float32():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    c = rng.standard_normal((5,)).astype(np.float32)  # Broadcast.
    ta, tb, tc = mixrt.tensor(a), mixrt.tensor(b), mixrt.tensor(c)
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_array_equal((ta - tc).numpy(), a - c)
    np.testing.assert_array_equal((ta * tb).numpy(), a * b)
    np.testing.assert_array_equal((ta / tb).numpy(), a / b)
    np.testing.assert_array_equal((-ta).numpy(), -a)
    np.testing.assert_array_equal((ta * 2.5).numpy(), a * np.float32(2.5))
    np.testing.assert_array_equal((1 - ta).numpy(), np.float32(1) - a)
    np.testing.assert_allclose((ta @ tb.T).numpy(), a @ b.T, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(ta.sum().item(), a.astype(np.float64).sum(),
                               rtol=1e-5)
    np.testing.assert_allclose(ta.mean(dim=1).numpy(), a.mean(axis=1),
                               rtol=1e-5, atol=1e-6)


def test_integer_tensors_keep_their_dtype_with_ints_and_divide_to_float():
    t = mixrt.tensor([1, 2, 3])
    assert (t + 1).dtype == mixrt.int64 and (t + 1).tolist() == [2, 3, 4]
    assert (t * 0.5).dtype == mixrt.float32
    assert (t / 2).tolist() == [0.5, 1.0, 1.5]


def test_comparisons_give_bool_tensors():
    t = mixrt.tensor([1.0, 2.0, 3.0])
    assert (t > 1.5).tolist() == [False, True, True]
    assert (t == mixrt.tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    assert (t <= 2).dtype == mixrt.bool


def test_indexing_and_slicing_are_views():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = mixrt.tensor(a)
    np.testing.assert_array_equal(t[1].numpy(), a[1])
    np.testing.assert_array_equal(t[:, 1:3].numpy(), a[:, 1:3])
    np.testing.assert_array_equal(t[..., -1].numpy(), a[..., -1])
    np.testing.assert_array_equal(t[0, ::2, 1:].numpy(), a[0, ::2, 1:])
    np.testing.assert_array_equal(t[None, 1].numpy(), a[None, 1])
    view = t[1, 2]
    assert view.data_ptr() == t.data_ptr() + (1 * 12 + 2 * 4) * 4
    with mixrt.no_grad():
        view.copy_(mixrt.zeros(4))
    assert t[1, 2].tolist() == [0.0] * 4  # Written through the view.
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]
    with pytest.raises(TypeError):
        t["a"]


def test_to_dtype_rounds_as_the_dtype_does():
    t = mixrt.tensor([1.0, 1.0 + 2**-10, 1.0 + 2**-8, 65504.0, 1e6])
    with np.errstate(over="ignore"):  # 1e6 overflows float16 to inf.
        ref = np.array([1.0, 1.0 + 2**-10, 1.0 + 2**-8, 65504.0, 1e6],
                       dtype=np.float32).astype(np.float16)
    np.testing.assert_array_equal(
        t.to(mixrt.float16).to(mixrt.float32).numpy(), ref.astype(np.float32))
    # bfloat16 keeps 7 fraction bits: 1 + 2^-10 rounds to 1, and 1 + 2^-8,
    # halfway to 1 + 2^-7, to the even neighbour 1; 1 + 2^-7 is exact.
    b = mixrt.tensor([1.0 + 2**-10, 1.0 + 2**-8, 1.0 + 2**-7])
    assert b.to(mixrt.bfloat16).to(mixrt.float32).tolist() == [
        1.0, 1.0, 1.0078125]
    with pytest.raises(TypeError, match="BFloat16"):
        t.to(mixrt.bfloat16).numpy()


def test_item_and_shape_errors():
    with pytest.raises(RuntimeError, match="cannot be converted"):
        mixrt.ones(2).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(mixrt.ones(2))
    with pytest.raises((ValueError, RuntimeError)):
        mixrt.ones(2, 3) + mixrt.ones(4)
    with pytest.raises((ValueError, RuntimeError)):
        mixrt.ones(2, 3) @ mixrt.ones(2, 3)


def test_backward_matches_hand_derivatives():
    x = mixrt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = mixrt.tensor([0.5, 0.25, -1.0], requires_grad=True)
    y = (x * w).sum() + (x * x).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5 + 2, 0.25 - 4, -1 + 6])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, -2.0, 3.0])
    assert x.is_leaf and not y.is_leaf
    d = x.detach()
    assert not d.requires_grad and d.data_ptr() == x.data_ptr()
    with pytest.raises(RuntimeError, match="requires grad"):
        x.numpy()


def test_no_grad_records_nothing():
    x = mixrt.ones(3, requires_grad=True)
    with mixrt.no_grad():
        assert not mixrt.is_grad_enabled()
        y = x * 2
    assert mixrt.is_grad_enabled()
    assert not y.requires_grad

    @mixrt.no_grad()
    def double(t):
        return t * 2

    assert not double(x).requires_grad


def test_in_place_operators_write_the_tensor_itself():
    model = mixrt.nn.Linear(3, 2)
    x = mixrt.randn(4, 3)
    before = model.weight.detach().numpy().copy()
    mixrt.nn.functional.mse_loss(model(x), mixrt.zeros(4, 2)).backward()
    grad = model.weight.grad.numpy().copy()
    with mixrt.no_grad():
        for p in model.parameters():
            p -= 0.5 * p.grad  # A hand-written SGD step.
    np.testing.assert_allclose(model.weight.detach().numpy(),
                               before - np.float32(0.5) * grad, rtol=1e-6)
    t = mixrt.ones(2, 3)
    ptr = t.data_ptr()
    t += mixrt.tensor([1.0, 2.0, 3.0])  # Broadcast into t.
    t *= 2
    assert t.data_ptr() == ptr and t.tolist() == [[4.0, 6.0, 8.0]] * 2
    with pytest.raises(RuntimeError, match="leaf Variable"):
        model.weight += 1.0
    with pytest.raises(RuntimeError, match="broadcast shape"):
        s = mixrt.ones(3)
        s += mixrt.ones(2, 3)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i = mixrt.tensor([1, 2])
        i += 0.5


def test_item_assignment_writes_the_view():
    a = np.zeros((3, 4), dtype=np.float32)
    t = mixrt.zeros(3, 4)
    t[0] = 5.0
    a[0] = 5.0
    t[:, 1] = mixrt.tensor([1.0, 2.0, 3.0])
    a[:, 1] = [1.0, 2.0, 3.0]
    t[2, 1:] = mixrt.tensor([7.0])  # Broadcast.
    a[2, 1:] = 7.0
    t[1, ::2] = 9  # An int into float32.
    a[1, ::2] = 9
    np.testing.assert_array_equal(t.numpy(), a)
    i = mixrt.zeros(2, dtype=mixrt.int64)
    i[1] = mixrt.tensor(2.7)  # Converted as .to(int64) converts.
    assert i.tolist() == [0, 2]
    p = mixrt.nn.Parameter(mixrt.zeros(2))
    with pytest.raises(RuntimeError, match="leaf Variable"):
        p[0] = 1.0
    with mixrt.no_grad():
        p[0] = 1.0
    assert p.tolist() == [1.0, 0.0]
    with pytest.raises((ValueError, RuntimeError)):
        t[0] = mixrt.ones(3)  # Does not broadcast to 4.
    with pytest.raises(TypeError):
        t[0] = "x"


# PyTorch's verdicts on a write that reads its own memory
# (aten/src/ATen/MemoryOverlap.cpp): the same elements in the same layout
# are left as they are; a dense source that partly overlaps the dense
# destination, or a destination that repeats elements, is a RuntimeError;
# where it cannot compare (gaps), mixrt reads the source as it was
# (numpy's rule for overlapping assignment, the reference here).
_OVERLAP = "refer to a single memory location"


def test_an_assignment_from_its_own_memory_is_refused_or_exact():
    m = mixrt.arange(16.0).reshape(4, 4)
    with pytest.raises(RuntimeError, match=_OVERLAP):
        m[:, :] = m.T  # Wrote the transpose over rows it was reading.
    with pytest.raises(RuntimeError, match=_OVERLAP):
        m[1:] = m[:-1]  # Dense rows, shifted: PyTorch refuses this too.
    np.testing.assert_array_equal(m.numpy(), np.arange(16.0).reshape(4, 4))
    m[:] = m  # The same elements: nothing to do.
    m.copy_(m)
    np.testing.assert_array_equal(m.numpy(), np.arange(16.0).reshape(4, 4))
    # Columns shifted (views with gaps): the source as it was.
    a = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    a[:, 1:] = a[:, :-1].copy()
    m[:, 1:] = m[:, :-1]
    np.testing.assert_array_equal(m.numpy(), a)
    a[::2, 1:] = a[::2, :-1].copy()
    m[::2, 1:] = m[::2, :-1]
    np.testing.assert_array_equal(m.numpy(), a)
    # A transpose through a copy is the user's way out, as PyTorch says.
    m[:, :] = m.T.clone()
    np.testing.assert_array_equal(m.numpy(), a.T)


def test_in_place_ops_refuse_what_pytorch_refuses():
    m = mixrt.arange(16.0).reshape(4, 4)
    with pytest.raises(RuntimeError, match=_OVERLAP):
        m += m.T
    with pytest.raises(RuntimeError, match=_OVERLAP):
        m[1:] *= m[:-1]
    np.testing.assert_array_equal(m.numpy(), np.arange(16.0).reshape(4, 4))
    m += m  # The same tensor: every element reads only itself.
    np.testing.assert_array_equal(m.numpy(), 2 * np.arange(16.0).reshape(4, 4))
    m[:, 1:] -= m[:, :-1]  # Gaps: PyTorch does not look; values as numpy's.
    a = 2 * np.arange(16.0, dtype=np.float32).reshape(4, 4)
    a[:, 1:] -= a[:, :-1].copy()
    np.testing.assert_array_equal(m.numpy(), a)


def test_indexing_with_tensors_gathers_rows_with_gradients():
    a = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    t = mixrt.tensor(a, requires_grad=True)
    idx = np.array([[3, 0], [-1, 1]])
    out = t[mixrt.tensor(idx)]
    np.testing.assert_array_equal(out.detach().numpy(), a[idx])
    out.sum().backward()
    counts = np.zeros(4, dtype=np.float32)
    np.add.at(counts, idx % 4, 1)
    np.testing.assert_array_equal(t.grad.numpy(),
                                  np.broadcast_to(counts[:, None, None],
                                                  a.shape))
    mask = np.array([True, False, True, True])
    np.testing.assert_array_equal(t.detach()[mixrt.tensor(mask)].numpy(),
                                  a[mask])
    assert t.detach()[mixrt.tensor([False] * 4)].shape == (0, 3, 2)
    with pytest.raises(IndexError):
        t[mixrt.tensor([0.5])]
    with pytest.raises((IndexError, ValueError, RuntimeError)):
        t.detach()[mixrt.tensor([4])]  # Past the end.


def test_in_place_writes_into_non_leaf_tensors_that_require_grad_are_refused():
    # Autograd would not see the write: the gradients would be wrong.
    y = mixrt.ones(2, requires_grad=True) * 2
    for write in (lambda: y.copy_(mixrt.zeros(2)),
                  lambda: y.__setitem__(0, 1.0),
                  lambda: y.__iadd__(1.0)):
        with pytest.raises(RuntimeError, match="autograd would not see"):
            write()
