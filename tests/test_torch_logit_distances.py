"""softfloat16.torch's logit, dist, renorm and cdist (``_cdist_forward``, ``_euclidean_dist``) against
native torch 2.13 CPU, bit for bit where torch's steps are IEEE operations in the order the mode
takes them, and against numpy float32 steps (correctly rounded + - * /) where torch uses its own
log (Sleef) or sums in another order. fp32math.log is the one shared piece of the FP32 logit
oracle (checked against float64 on its own)."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from softfloat16 import fp32math  # noqa: E402
from softfloat16.torch.registry import NotEmulatedError  # noqa: E402

HALVES = [torch.bfloat16, torch.float16]
WIDTH = {2: torch.int16, 4: torch.int32}


def _mismatches(native: torch.Tensor, emulated: torch.Tensor) -> int:
    """Elements whose bits differ (two NaNs count as equal: payloads are the profile's)."""
    assert native.dtype == emulated.dtype and native.shape == emulated.shape
    width = WIDTH[native.element_size()]
    differ = (native.view(width) != emulated.view(width)) & ~(native.isnan() & emulated.isnan())
    return int(differ.sum())


def _emulated(function):
    with sft.emulate(strict=True):
        return function()


def _logit_inputs(dtype, n=4000):
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, generator=generator) * 1.4 - 0.2
    x[:9] = torch.tensor([0.0, -0.0, 1.0, math.nan, math.inf, -math.inf, 0.5, 1e-30, 1 - 2 ** -20])
    return x.to(dtype)


@pytest.mark.parametrize("eps", [None, 0.0, 1e-6, 0.1, 0.6, -1.0])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_logit_16_bit_matches_torch(dtype, eps):
    x = _logit_inputs(dtype)
    assert _mismatches(torch.logit(x, eps), _emulated(lambda: torch.logit(x, eps))) == 0


@pytest.mark.parametrize("eps", [None, 0.1, 0.6])
def test_logit_fp32_is_log_of_the_rounded_quotient(eps):
    """FP32: the quotient x / (1 - x) of clamped x (numpy float32 steps), then fp32math.log. torch's
    own log (Sleef) is not correctly rounded: the mode differs from torch only where the two logs do."""
    x = _logit_inputs(torch.float32)
    clamped = x.numpy().copy()
    if eps is not None:
        lo, hi = np.float32(eps), np.float32(1) - np.float32(eps)
        clamped = np.where(clamped < lo, lo, np.where(clamped > hi, hi, clamped))
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = (clamped / (np.float32(1) - clamped)).astype(np.float32)
    expected = np.asarray(fp32math.log(quotient.view(np.uint32)))
    emulated = _emulated(lambda: torch.logit(x, eps))
    got = emulated.numpy().view(np.uint32)
    nan = np.isnan(quotient)
    assert np.array_equal(got[~nan], expected[~nan]) and np.isnan(emulated.numpy()[nan]).all()
    native = torch.logit(x, eps)
    assert _mismatches(native, torch.log(torch.from_numpy(quotient))) == 0  # torch: log of the same quotient
    differ = (native.numpy().view(np.uint32) != got) & ~nan
    if eps != 0.6:  # (0.6 clamps every x to one of two quotients)
        assert differ.mean() < 0.05
    assert np.abs(native.numpy().view(np.int32)[differ] - got.view(np.int32)[differ]).max(initial=0) <= 1


def test_logit_backward_through_autograd():
    x = torch.tensor([0.25, 0.5, 0.75], dtype=torch.bfloat16, requires_grad=True)
    with sft.emulate(strict=True):
        torch.logit(x, 0.1).sum().backward()
    assert x.grad.tolist() == [5.34375, 4.0, 5.34375]  # 1 / (x (1 - x)) rounded to BF16


# FP32 ord 2 and 3 left out: torch's FP32 norm of a contiguous tensor sums in its own order
# (docs/torch.md, linalg_vector_norm).
DIST_CASES = [(dtype, p) for dtype in (torch.float32, *HALVES) for p in (2, 1, 0, math.inf, 3)
              if not (dtype == torch.float32 and p in (2, 3))]


@pytest.mark.parametrize(("dtype", "p"), DIST_CASES, ids=[f"{d}-{p}" for d, p in DIST_CASES])
def test_dist_matches_torch(dtype, p):
    generator = torch.Generator().manual_seed(1)
    shape = (5, 7, 33)
    a = torch.randn(shape, generator=generator).to(dtype)
    b = torch.randn(shape[-1], generator=generator).to(dtype)
    native = torch.dist(a, b, p)
    assert _mismatches(native, _emulated(lambda: torch.dist(a, b, p))) == 0


# FP32 over dim 0 left out: torch's FP32 norm of contiguous slices sums in another order.
RENORM_CASES = [(dtype, *case) for dtype in (torch.float32, *HALVES)
                for case in ((2, 0, 2.0), (2, 1, 3.0), (1, 1, 4.0), (2, -1, 0.0), (2, 0, 1e6))
                if not (dtype == torch.float32 and case[1] == 0)]


@pytest.mark.parametrize(("dtype", "p", "dim", "maxnorm"), RENORM_CASES, ids=lambda x: str(x))
def test_renorm_matches_torch(dtype, p, dim, maxnorm):
    generator = torch.Generator().manual_seed(2)
    # FP32: slices along dim 0 (strided), which torch sums in index order, as the mode does
    shape = (40, 6) if dtype == torch.float32 else (6, 3, 40)
    w = (torch.randn(shape, generator=generator) * 3).to(dtype)
    native = torch.renorm(w, p, dim, maxnorm)
    assert _mismatches(native, _emulated(lambda: torch.renorm(w, p, dim, maxnorm))) == 0
    if maxnorm == 1e6:
        assert torch.equal(native, w)  # every factor 1


def test_renorm_refuses_bad_arguments():
    w = torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="non-positive-norm"), sft.emulate(strict=True):
        torch.renorm(w, 0, 0, 1.0)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"), sft.emulate(strict=True):
        torch.renorm(torch.ones(4), 2, 0, 1.0)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf])
@pytest.mark.parametrize(("r1", "r2", "m"), [(6, 5, 37), (30, 5, 37), (3, 40, 1)])
def test_cdist_direct_kernel_fp32_matches_torch(r1, r2, m, p):
    """torch's direct kernel (FP32): every p, any width; p = 2 only when no operand has more than
    25 rows or with compute_mode="donot_use_mm_for_euclid_dist"."""
    generator = torch.Generator().manual_seed(3)
    x1, x2 = torch.randn(2, r1, m, generator=generator), torch.randn(r2, m, generator=generator)
    x1[0, 0, 0] = x2[1, 0] = 0.0  # a zero distance component
    mode = "donot_use_mm_for_euclid_dist" if p == 2 else "use_mm_for_euclid_dist_if_necessary"
    native = torch.cdist(x1, x2, p, mode)
    assert _mismatches(native, _emulated(lambda: torch.cdist(x1, x2, p, mode))) == 0


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize(("r1", "r2", "mode"), [(30, 5, "use_mm_for_euclid_dist_if_necessary"),
                                                (6, 5, "use_mm_for_euclid_dist")])
@pytest.mark.parametrize("batched", [False, True], ids=["2d", "batched"])
def test_cdist_matrix_product_form_matches_torch(dtype, r1, r2, mode, batched):
    """p = 2 through ``_euclidean_dist`` (squared norms, one matrix product, clamp, sqrt)."""
    generator = torch.Generator().manual_seed(4)
    x1 = torch.randn(*((2,) if batched else ()), r1, 37, generator=generator).to(dtype)
    x2 = torch.randn(r2, 37, generator=generator).to(dtype)
    native = torch.cdist(x1, x2, 2.0, mode)
    assert _mismatches(native, _emulated(lambda: torch.cdist(x1, x2, 2.0, mode))) == 0


def test_cdist_matrix_product_form_fp32_is_close():
    """FP32: the mode's matrix product (an fma chain in index order) is not MKL's, so the expansion
    ``|a|^2 - 2 a.b + |b|^2`` differs from torch's in its last bits; both are within the expansion's
    cancellation error of the float64 distances."""
    generator = torch.Generator().manual_seed(5)
    x1, x2 = torch.randn(30, 16, generator=generator), torch.randn(7, 16, generator=generator)
    emulated = _emulated(lambda: torch.cdist(x1, x2))
    exact = torch.cdist(x1.double(), x2.double(), compute_mode="donot_use_mm_for_euclid_dist")
    assert (emulated.double() - exact).abs().max() < 1e-5 * exact.max()


@pytest.mark.parametrize("m", [2, 3, 5, 6, 7, 9, 14])
def test_cdist_p2_direct_kernel_widths(m):
    """torch's compiled p = 2 loop: four coordinates a turn with the square rounded, the last
    ``m mod 4`` fused into ``fma(d, d, agg)``; widths with every remainder."""
    generator = torch.Generator().manual_seed(m)
    x1, x2 = torch.randn(20, m, generator=generator), torch.randn(15, m, generator=generator)
    native = torch.cdist(x1, x2, 2.0, "donot_use_mm_for_euclid_dist")
    emulated = _emulated(lambda: torch.cdist(x1, x2, 2.0, "donot_use_mm_for_euclid_dist"))
    assert _mismatches(native, emulated) == 0


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf])
@pytest.mark.parametrize(("batch", "r1", "r2", "m"), [(2, 6, 5, 37), (1, 7, 9, 8), (3, 4, 20, 3)])
def test_cdist_backward_matches_torch(batch, r1, r2, m, p):
    """``_cdist_backward`` (both operands' gradients) through autograd, zero distances included."""
    generator = torch.Generator().manual_seed(6)
    x1, x2 = torch.randn(batch, r1, m, generator=generator), torch.randn(r2, m, generator=generator)
    x1[0, 0] = x2[0]
    x2[1, 2] = x1[0, 1, 2]
    grad = torch.randn(batch, r1, r2, generator=generator)
    results = []
    for emulated in (False, True):
        a, b = x1.clone().requires_grad_(), x2.clone().requires_grad_()
        with sft.emulate(strict=True) if emulated else torch.enable_grad():
            torch.cdist(a, b, p, "donot_use_mm_for_euclid_dist").backward(grad)
        results.append((a.grad, b.grad))
    for native, emulated in zip(*results):
        assert _mismatches(native, emulated) == 0


def test_cdist_refusals():
    x = torch.ones(3, 4, dtype=torch.bfloat16)
    with pytest.raises(NotEmulatedError, match="direct cdist kernel"), sft.emulate(strict=True):
        torch.cdist(x, x, 1.0)  # torch itself: "cdist" not implemented for 'BFloat16'
    with pytest.raises(NotEmulatedError, match="p = 3"), sft.emulate(strict=True):
        torch.cdist(x.float(), x.float(), 3.0)
