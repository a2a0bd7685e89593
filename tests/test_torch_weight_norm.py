"""softfloat16.torch's ``_weight_norm_interface`` and its backward (``torch.nn.utils.weight_norm``,
``parametrizations.weight_norm``) against native torch 2.13 CPU, bit for bit: FP32 and BF16, the
first and the last dimension, rows shorter and longer than torch's vectors, partial vectors, and
torch's thread split of the last-dimension sums (the mode's ``threads``)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch.registry import NotEmulatedError  # noqa: E402

A = torch.ops.aten
WIDTH = {2: torch.int16, 4: torch.int32}
CASES = [((50, 5), 0), ((20, 13), 0), ((40, 100), 0), ((7, 3, 9), 0), ((60, 23), 1), ((9, 4, 30), 2), ((300, 7), 1)]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(WIDTH[a.element_size()]),
                                                                     b.view(WIDTH[b.element_size()]))


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _operands(shape, dim, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    g_shape = [1] * len(shape)
    g_shape[dim] = shape[dim]
    v = torch.randn(*shape, generator=generator).to(dtype)
    g = torch.randn(*g_shape, generator=generator).to(dtype)
    return v, g, torch.randn(*shape, generator=generator).to(dtype)


# Thread counts 1 and 3 where torch splits the sums over threads (the last dimension); first-dimension
# norms do not depend on the thread count.
THREADED = [(shape, dim, count) for shape, dim in CASES for count in ((1,) if dim == 0 else (1, 3))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(("shape", "dim", "count"), THREADED, ids=[f"{s}-{d}-{c}" for s, d, c in THREADED])
def test_weight_norm_interface_matches_torch(shape, dim, count, dtype, threads):
    torch.set_num_threads(count)
    v, g, grad_w = _operands(shape, dim, dtype, seed=len(shape) * 100 + shape[-1])
    w, norm = A._weight_norm_interface(v, g, dim)
    grad_v, grad_g = A._weight_norm_interface_backward(grad_w, v, g, norm, dim)
    with sft.emulate(strict=True, threads=count):
        w_e, norm_e = A._weight_norm_interface(v, g, dim)
        grad_v_e, grad_g_e = A._weight_norm_interface_backward(grad_w, v, g, norm, dim)
    assert norm.dtype == torch.float32 and _same(norm, norm_e)
    assert _same(w, w_e)
    assert _same(grad_v, grad_v_e) and _same(grad_g, grad_g_e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_weight_norm_through_autograd(dtype, threads):
    """``torch._weight_norm`` (what the weight_norm hooks call) forward and backward."""
    torch.set_num_threads(1)
    results = []
    for emulated in (False, True):
        v, g, grad_w = _operands((12, 20), 0, dtype, seed=7)
        v.requires_grad_(), g.requires_grad_()
        with sft.emulate(strict=True) if emulated else torch.enable_grad():
            w = torch._weight_norm(v, g, 0)
            w.backward(grad_w)
        results.append((w.detach(), v.grad, g.grad))
    for native, emulated in zip(*results):
        assert _same(native, emulated)


def test_weight_norm_refusals():
    v, g = torch.ones(3, 4, 5), torch.ones(1, 4, 1)
    with pytest.raises(NotEmulatedError, match="first or the last"), sft.emulate(strict=True):
        A._weight_norm_interface(v, g, 1)
    with pytest.raises(NotEmulatedError, match="float32, bfloat16"), sft.emulate(strict=True):
        A._weight_norm_interface(v.half(), torch.ones(3, 1, 1, dtype=torch.half), 0)
