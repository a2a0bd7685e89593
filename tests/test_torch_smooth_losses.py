"""smooth_l1_loss, huber_loss (and their gradients), logit_backward and logcumsumexp under the torch mode.

The losses and logit_backward are compared bit for bit with torch CPU's own kernels (the semantics the
mode models: their vectorised loops, so every line here is a multiple of 64 elements long, with values
at the beta/delta boundary, zeros of both signs, infinities and NaNs). logcumsumexp uses the emulated
FP32 exp and log1p where torch uses libm's: it is checked step by step against a float64 computation
of the same steps, against the float64 logcumsumexp, and for its agreement share with torch.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VIEWS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
N = 192  # three vectorised iterations of torch's loop (64 elements of a 16-bit type, AVX-512)


def _mismatches(got: torch.Tensor, want: torch.Tensor) -> int:
    """Elements whose bits differ, NaN payloads aside (a NaN where the other is NaN counts as equal)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    view = VIEWS[got.dtype]
    differ = got.contiguous().view(view) != want.contiguous().view(view)
    return int((differ & ~(torch.isnan(got) & torch.isnan(want))).sum())


def _pair(dtype, parameter: float, seed: int, specials: bool = True):
    """(x, y): random differences spread over 2**-8 .. 2**8 and, every fifth element, a difference of
    exactly +-parameter or one unit either side of it; with ``specials`` zeros, infinities and NaNs."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.standard_normal(N) * np.exp2(rng.integers(-8, 8, N))).to(dtype)
    y = torch.from_numpy(rng.standard_normal(N) * np.exp2(rng.integers(-8, 8, N))).to(dtype)
    boundary = torch.tensor(parameter, dtype=dtype)
    for offset, target in ((0, boundary), (1, torch.nextafter(boundary, torch.tensor(0.0, dtype=dtype))),
                           (2, torch.nextafter(boundary, torch.tensor(9.0, dtype=dtype))), (3, -boundary)):
        index = slice(offset, N, 5)
        y[index] = torch.tensor(0.0, dtype=dtype)
        x[index] = target
    if specials:
        x[4:40:5] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 0.0, 1.0, -0.0], dtype=dtype)
        y[4:40:5] = torch.tensor([-0.0, 0.0, 1.0, float("inf"), 0.0, float("nan"), float("inf"), -0.0], dtype=dtype)
    return x, y


LOSSES = [("smooth_l1_loss", beta) for beta in (1.0, 0.25, 0.0, 3.0)] + [("huber_loss", d) for d in (1.0, 0.1, 2.5)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name, parameter", LOSSES)
def test_loss_and_its_gradient_match_torch(dtype, name, parameter):
    loss, backward = getattr(torch.ops.aten, name), getattr(torch.ops.aten, name + "_backward")
    x, y = _pair(dtype, parameter, seed=int(parameter * 8) + 3)
    grad = torch.from_numpy(np.random.default_rng(7).standard_normal(N)).to(dtype)
    clean_x, clean_y = _pair(dtype, parameter, seed=11, specials=False)  # reductions that are not NaN
    for reduction in (0, 1, 2):
        inputs = (x, y) if reduction == 0 else (clean_x, clean_y)
        g = grad if reduction == 0 else grad[:1].reshape(())
        want = loss(*inputs, 0, parameter)  # torch's elementwise loss; reduced below as the mode's sum does
        if reduction:
            want = _sequential_reduction(want, reduction)
        want_grad = backward(g, *inputs, reduction, parameter)
        with sft.emulate() as mode:
            got, got_grad = loss(*inputs, reduction, parameter), backward(g, *inputs, reduction, parameter)
        assert not mode.fallbacks
        assert _mismatches(got, want) == 0, f"{name} {dtype} reduction={reduction}"
        assert _mismatches(got_grad, want_grad) == 0, f"{name}_backward {dtype} reduction={reduction}"
    assert torch.isfinite(want) and torch.isnan(loss(x, y, 0, parameter)).any()


def _sequential_reduction(losses: torch.Tensor, reduction: int) -> torch.Tensor:
    """The mode's ``sum`` / ``mean`` of a loss tensor (its default order): the elements added in
    index order in FP32 from +0 (numpy's float32 accumulate, one rounding each), divided by the count
    in FP32 for the mean, rounded once into the loss's dtype. torch's own FP32 sum adds in another
    order (its vectorised cascade)."""
    values = losses.float().numpy()
    total = np.add.accumulate(values, dtype=np.float32)[-1]
    total = total / np.float32(values.size) if reduction == 1 else total
    return torch.tensor(total, dtype=torch.float32).to(losses.dtype)


def test_losses_through_autograd_without_fallbacks():
    x, y = _pair(torch.bfloat16, 1.0, seed=5, specials=False)
    for function in (torch.nn.functional.smooth_l1_loss, torch.nn.functional.huber_loss):
        leaf = x.clone().requires_grad_()
        function(leaf, y, reduction="sum").backward()
        want = leaf.grad
        leaf.grad = None
        with sft.emulate() as mode:
            function(leaf, y, reduction="sum").backward()
        assert not mode.fallbacks and _mismatches(leaf.grad, want) == 0


def test_bad_loss_arguments_are_named():
    x = torch.ones(4, dtype=torch.float16)
    with pytest.raises(ValueError, match="beta must be non-negative"), sft.emulate():
        torch.ops.aten.smooth_l1_loss(x, x, 1, -1.0)
    with pytest.raises(ValueError, match="delta must be positive"), sft.emulate():
        torch.ops.aten.huber_loss(x, x, 1, 0.0)
    with pytest.raises(ValueError, match="reduction must be"), sft.emulate():
        torch.ops.aten.huber_loss(x, x, 3, 1.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_logit_backward_matches_torch(dtype):
    rng = np.random.default_rng(13)
    x = torch.from_numpy(rng.uniform(-0.2, 1.2, N)).to(dtype)
    x[:40] = torch.tensor([0.0, -0.0, 1.0, 0.1, 0.9, 0.05, 0.95, float("nan"), float("inf"), -float("inf")] * 4,
                          dtype=dtype)
    grad = torch.from_numpy(rng.standard_normal(N)).to(dtype)
    grad[1:40:10] = 0.0
    for eps in (None, 0.0, 0.1, 0.05, 1e-3, 0.6, -1.0):
        want = torch.ops.aten.logit_backward(grad, x, eps)
        with sft.emulate():
            got = torch.ops.aten.logit_backward(grad, x, eps)
        assert _mismatches(got, want) == 0, f"{dtype} eps={eps}"


# -- logcumsumexp ----------------------------------------------------------------------------------
def _ulp32(value: np.ndarray) -> np.ndarray:
    """The FP32 unit in the last place at each |value| (the subnormal spacing below 2**-126)."""
    return np.exp2(np.floor(np.log2(np.maximum(np.abs(value), 2.0**-126))) - 23)


def test_logcumsumexp_steps_within_two_ulps_of_float64():
    """Each FP32 step from the mode's own previous value: ``r = log1p(exp(low - high)) + high`` with
    ``low - high`` rounded to FP32 (numpy's float32 subtraction), log1p and exp in float64; the mode's
    ``r`` is within 2 ulps of the larger of |r| and log1p(...) (exp and log1p under 1 ulp, one rounding
    of the sum). Measured: 1.29 ulps at most on these inputs."""
    rng = np.random.default_rng(17)
    x = (rng.standard_normal((24, 40)) * np.exp2(rng.integers(-3, 6, (24, 1)))).astype(np.float32)
    x[0, :5] = [-np.inf, -np.inf, 0.0, np.inf, 1.0]
    with sft.emulate():
        got = torch.logcumsumexp(torch.from_numpy(x), 1).numpy()
    previous = np.concatenate([np.full((24, 1), -np.inf, np.float32), got[:, :-1]], axis=1)
    low, high = np.minimum(x, previous), np.maximum(x, previous)
    with np.errstate(invalid="ignore"):
        difference = (low - high).astype(np.float64)  # an FP32 subtraction
        tail = np.log1p(np.exp(difference))
        want = tail + high.astype(np.float64)
    infinite = (low == high) & ~np.isfinite(low)
    want = np.where(infinite, x, want)
    assert np.array_equal(got[infinite], x[infinite]) and np.isinf(got[0, 3:]).all()
    finite = np.isfinite(want)
    error = np.abs(got[finite].astype(np.float64) - want[finite]) / _ulp32(np.maximum(np.abs(want[finite]),
                                                                                       tail[finite]))
    assert error.max() <= 2.0, error.max()


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16), ids=str)
def test_logcumsumexp_within_one_ulp_of_the_exact_value_and_near_torch(dtype):
    rng = np.random.default_rng(19)
    x = torch.from_numpy(rng.standard_normal((16, 3, 20)) * 4).to(dtype)
    with sft.emulate():
        got = torch.logcumsumexp(x, 1)
    exact = np.logaddexp.accumulate(x.double().numpy(), axis=1)
    rounded = torch.from_numpy(np.abs(exact)).to(dtype)
    ulp = (torch.nextafter(rounded, torch.tensor(np.inf, dtype=dtype)).double() - rounded.double()).numpy()
    assert (np.abs(got.double().numpy() - exact) <= ulp).all()
    assert _mismatches(got, torch.logcumsumexp(x, 1)) <= got.numel() // 100  # measured: none differ


def test_logcumsumexp_backward_runs_emulated():
    x = torch.from_numpy(np.random.default_rng(23).standard_normal((3, 8))).to(torch.bfloat16).requires_grad_()
    with sft.emulate() as mode:
        torch.logcumsumexp(x, 1).sum().backward()
    assert not mode.fallbacks and torch.isfinite(x.grad).all()
