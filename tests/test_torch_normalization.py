"""softfloat16.torch: var/std, layer norm (forward and backward), dropout, embedding backward and
the scatter-adds, each against a numpy float32 step-by-step oracle of its documented algorithm
(bit for bit) and against native torch 2.13 CPU (mismatch counts bounded by what was measured)."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16 as sf  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch import scatter  # noqa: E402
from softfloat16.torch.tensors import bits  # noqa: E402

HALVES = [torch.float16, torch.bfloat16]
DTYPES = HALVES + [torch.float32]
FORMATS = {torch.float16: sf.fp16, torch.bfloat16: sf.bf16, torch.float32: sf.fp32}
aten = torch.ops.aten
f32 = np.float32


# -- helpers ---------------------------------------------------------------------------------------------
def mismatches(got: torch.Tensor, want: torch.Tensor) -> int:
    """Elements whose bits differ (any NaN matches any NaN: torch canonicalises BF16 NaNs)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    g, w = bits(got).ravel(), bits(want).ravel()
    fmt = FORMATS[got.dtype]
    both_nan = fmt.is_nan(g) & fmt.is_nan(w)
    return int(((g != w) & ~both_nan).sum())


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want|, in float64."""
    got, want = got.detach().double(), want.detach().double()
    return ((got - want).abs().max() / want.abs().max()).item()


def assert_same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    count = mismatches(got, want)
    assert count == 0, f"{what}: {count} of {got.numel()} elements differ"


def wide(t: torch.Tensor) -> np.ndarray:
    """Exact float32 values of a float16/bfloat16/float32 tensor."""
    return t.detach().float().numpy().astype(f32)


def rounded(values: np.ndarray, dtype) -> torch.Tensor:
    """float32 values rounded once (to nearest even) into dtype: torch's conversion is correct."""
    return torch.from_numpy(np.ascontiguousarray(values, dtype=f32)).to(dtype)


def sequential_sum(rows: np.ndarray) -> np.ndarray:
    """Sums along the last axis, ((0 + x0) + x1) + ..., each addition a float32 rounding."""
    total = np.zeros(rows.shape[:-1], f32)
    for j in range(rows.shape[-1]):
        total = (total + rows[..., j]).astype(f32)
    return total


def gaussian(*shape, dtype, seed, scale=2.0, shift=0.5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * scale + shift).to(dtype)


def spread(*shape, dtype, seed) -> torch.Tensor:
    """Values times random powers of two in [2**-12, 2**12]: their float32 sums are inexact, so
    the order and the format of an accumulation show in the result."""
    rng = np.random.default_rng(seed)
    powers = torch.from_numpy(np.exp2(rng.integers(-12, 13, shape)).astype(np.float32))
    return (gaussian(*shape, dtype=torch.float32, seed=seed) * powers).to(dtype)


def with_specials(x: torch.Tensor) -> torch.Tensor:
    """Rows with NaN, +-inf, signed zeros, subnormals and a constant row."""
    x = x.clone()
    rows = x.view(x.shape[0], -1)  # the same memory, one row per leading index
    fmt = FORMATS[x.dtype]
    rows[0, 0] = float("nan")
    rows[1, 1] = float("inf")
    rows[2, :] = -0.0
    rows[2, 0] = 0.0
    tiny = torch.from_numpy(np.array([1, 3, fmt.min_normal - 1], dtype=fmt.dtype).view(
        {2: np.int16, 4: np.int32}[x.element_size()])).view(x.dtype)
    rows[3, :3] = tiny
    rows[3, 3:6] = -tiny
    rows[4, :] = rows[4, 0]
    return x


@pytest.fixture(autouse=True)
def quiet_numpy():
    with np.errstate(all="ignore"):
        yield


# -- var / std ---------------------------------------------------------------------------------------------
def variance_oracle(rows: np.ndarray, correction) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each row, as opmath.moments32 documents them."""
    count = rows.shape[-1]
    mean = (sequential_sum(rows) / f32(count)).astype(f32)
    deviations = (rows - mean[..., None]).astype(f32)
    squares = sequential_sum((deviations * deviations).astype(f32))
    return mean, (squares / f32(max(count - correction, 0))).astype(f32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_variance_family_is_the_two_pass_fp32_definition(dtype):
    x = with_specials(gaussian(7, 9, 13, dtype=dtype, seed=1))
    with sft.emulate() as mode:
        results = {
            "var dim=2": torch.var(x, dim=2),
            "std dim=(0,2) correction=0 keepdim": torch.std(x, dim=(0, 2), correction=0, keepdim=True),
            "var all": torch.var(x),
            "var_mean dim=1": torch.var_mean(x, dim=1, correction=2),
            "std_mean dim=-1 unbiased=False": torch.std_mean(x, -1, unbiased=False),
            "var one element": torch.var(x[:, :1, :1], dim=(1, 2)),
        }
    assert not mode.fallbacks
    values = wide(x)
    cases = {
        "var dim=2": (values, 1, False, (7, 9)),
        "std dim=(0,2) correction=0 keepdim": (values.transpose(1, 0, 2).reshape(9, -1), 0, True, (1, 9, 1)),
        "var all": (values.reshape(1, -1), 1, False, ()),
        "var_mean dim=1": (values.transpose(0, 2, 1), 2, False, (7, 13)),
        "std_mean dim=-1 unbiased=False": (values, 0, True, (7, 9)),
        "var one element": (values[:, :1, :1].reshape(7, 1), 1, False, (7,)),
    }
    for name, (rows, correction, is_std, shape) in cases.items():
        mean, var = variance_oracle(rows, correction)
        spread = np.sqrt(var).astype(f32) if is_std else var
        got = results[name]
        first = got[0] if isinstance(got, tuple) else got
        assert_same(first, rounded(spread, dtype).reshape(shape), f"{dtype} {name}")
        if isinstance(got, tuple):
            assert_same(got[1], rounded(mean, dtype).reshape(shape), f"{dtype} {name} (mean)")
    # Native torch agrees on dtypes and shapes, and on NaN-ness (one element, correction 1: 0/0).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch warns of the degrees of freedom
        native = torch.var(x[:, :1, :1], dim=(1, 2))
    assert results["var one element"].isnan().all() and native.isnan().all()


# Against native torch (Welford in float64, one rounding), measured on these inputs: float16 and
# bfloat16 0 of 150 results differ; float32 86 of 150 (by at most 3.3e-7 relative, 2-3 ulps).
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_variance_close_to_native_torch(dtype):
    x = gaussian(100, 50, dtype=dtype, seed=2)
    with sft.emulate():
        var, std = torch.var(x, dim=1), torch.std(x, dim=0)
    native_var, native_std = torch.var(x, dim=1), torch.std(x, dim=0)
    if dtype != torch.float32:
        assert mismatches(var, native_var) <= 1 and mismatches(std, native_std) <= 1
    else:
        np.testing.assert_allclose(var.numpy(), native_var.numpy(), rtol=2e-6)
        np.testing.assert_allclose(std.numpy(), native_std.numpy(), rtol=2e-6)


# -- layer norm --------------------------------------------------------------------------------------------
def layer_norm_oracle(x: np.ndarray, weight, bias, eps: float):
    """(y, mean, rstd) in float32 per normalization.native_layer_norm's documented steps."""
    mean, var = variance_oracle(x, 0)
    rstd = (f32(1) / np.sqrt((var + f32(eps)).astype(f32)).astype(f32)).astype(f32)
    y = ((x - mean[:, None]).astype(f32) * rstd[:, None]).astype(f32)
    if weight is not None:
        y = (y * weight).astype(f32)
    if bias is not None:
        y = (y + bias).astype(f32)
    return y, mean, rstd


@pytest.mark.parametrize("affine", ["weight+bias", "none", "float32 parameters"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_forward_is_its_fp32_definition(dtype, affine):
    x = gaussian(64, 4, 24, dtype=dtype, seed=3)
    x[32:] += 1000  # a large mean: the formula's cancellation shows (y = x*rstd - mean*rstd would differ)
    x = with_specials(x)
    parameter_dtype = torch.float32 if affine == "float32 parameters" else dtype
    weight = None if affine == "none" else gaussian(4, 24, dtype=parameter_dtype, seed=4, shift=1.0)
    bias = None if affine == "none" else gaussian(4, 24, dtype=parameter_dtype, seed=5)
    with sft.emulate() as mode:
        y, mean, rstd = aten.native_layer_norm(x, [4, 24], weight, bias, 1e-5)
    assert not mode.fallbacks
    native = aten.native_layer_norm(x, [4, 24], weight, bias, 1e-5)
    for got, want in zip((y, mean, rstd), native):  # dtypes and shapes as torch CPU returns them
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
    want_y, want_mean, want_rstd = layer_norm_oracle(
        wide(x).reshape(64, -1), None if weight is None else wide(weight).ravel(),
        None if bias is None else wide(bias).ravel(), 1e-5)
    assert_same(y, rounded(want_y, dtype).reshape(x.shape), f"{dtype} {affine} y")
    assert_same(mean, rounded(want_mean, mean.dtype).reshape(mean.shape), f"{dtype} {affine} mean")
    assert_same(rstd, rounded(want_rstd, rstd.dtype).reshape(rstd.shape), f"{dtype} {affine} rstd")
    assert y[0].isnan().all() and y[1].isnan().all() and not y[2:].isnan().any()


# Measured against torch 2.13 CPU (vectorised Welford moments in float), on these 12,288 outputs:
# float16 7 differ (by one unit in the last place), bfloat16 0; float32 5,780 differ (no final
# rounding hides the moments' last bits), by at most 1.9e-6 absolute (outputs of order 1).
LAYER_NORM_NATIVE_MISMATCHES = {torch.float16: 40, torch.bfloat16: 12}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_close_to_native_torch(dtype):
    x = gaussian(256, 48, dtype=dtype, seed=6)
    weight, bias = gaussian(48, dtype=dtype, seed=7, shift=1.0), gaussian(48, dtype=dtype, seed=8)
    with sft.emulate():
        y = torch.nn.functional.layer_norm(x, (48,), weight, bias)
    native = torch.nn.functional.layer_norm(x, (48,), weight, bias)
    if dtype == torch.float32:
        np.testing.assert_allclose(y.numpy(), native.numpy(), rtol=0, atol=4e-6)
        return
    assert mismatches(y, native) <= LAYER_NORM_NATIVE_MISMATCHES[dtype]
    ulp = 2.0 ** -(FORMATS[dtype].fraction_bits)
    np.testing.assert_allclose(y.float().numpy(), native.float().numpy(), rtol=ulp, atol=ulp)


def layer_norm_backward_oracle(dy, x, mean, rstd, weight):
    """torch CPU's formula in float32 steps with sequential sums (normalization's docstring)."""
    count = x.shape[1]
    a, mu = rstd[:, None], mean[:, None]
    g = dy if weight is None else (dy * weight).astype(f32)
    ds = sequential_sum((g * x).astype(f32))[:, None]
    db = sequential_sum(g)[:, None]
    scale = (f32(1) / f32(count)).astype(f32)
    b = ((((((db * mu).astype(f32) - ds).astype(f32) * a).astype(f32) * a).astype(f32) * a).astype(f32)
         * scale).astype(f32)
    c = ((-b * mu).astype(f32) - ((db * a).astype(f32) * scale).astype(f32)).astype(f32)
    first = (a * dy).astype(f32)
    if weight is not None:
        first = (first * weight).astype(f32)
    dx = ((first + (b * x).astype(f32)).astype(f32) + c).astype(f32)
    normalized = ((a * x).astype(f32) + (-a * mu).astype(f32)).astype(f32)
    dweight = sequential_sum(np.ascontiguousarray(((dy * normalized).astype(f32)).T))
    dbias = sequential_sum(np.ascontiguousarray(dy.T))
    return dx, dweight, dbias


@pytest.mark.parametrize("with_weight", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_backward_is_torch_cpus_formula_in_fp32(dtype, with_weight):
    x = gaussian(20, 32, dtype=dtype, seed=9).requires_grad_()
    weight = gaussian(32, dtype=dtype, seed=10, shift=1.0).requires_grad_() if with_weight else None
    bias = gaussian(32, dtype=dtype, seed=11).requires_grad_() if with_weight else None
    dy = gaussian(20, 32, dtype=dtype, seed=12, shift=0.0)
    with sft.emulate() as mode:
        y = torch.nn.functional.layer_norm(x, (32,), weight, bias)
        y.backward(dy)
        _, mean, rstd = aten.native_layer_norm(x.detach(), [32], weight, bias, 1e-5)
    assert not mode.fallbacks
    dx, dweight, dbias = layer_norm_backward_oracle(wide(dy), wide(x), wide(mean).ravel(), wide(rstd).ravel(),
                                                    wide(weight) if with_weight else None)
    assert_same(x.grad, rounded(dx, dtype), f"{dtype} dx")
    if with_weight:
        assert_same(weight.grad, rounded(dweight, dtype), f"{dtype} dweight")
        assert_same(bias.grad, rounded(dbias, dtype), f"{dtype} dbias")
    # And close to native torch, which rounds dweight and dbias into the dtype row by row. Measured
    # here: dx 1 of 640 (float16) / 0 (bfloat16) differ; about half of dweight and dbias differ, by
    # up to 7e-4 (float16) / 5e-3 (bfloat16) of the largest; float32 within 1e-6 relative.
    grads = [t.grad.clone() for t in (x, weight, bias) if t is not None]
    for t in (x, weight, bias):
        if t is not None:
            t.grad = None
    torch.nn.functional.layer_norm(x, (32,), weight, bias).backward(dy)
    tolerance = {torch.float16: 4e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5}[dtype]
    for got, t in zip(grads, (t for t in (x, weight, bias) if t is not None)):
        scale = t.grad.float().abs().max().item()
        assert (got.float() - t.grad.float()).abs().max().item() <= tolerance * scale


def test_layer_norm_backward_partial_output_mask():
    x, dy = gaussian(5, 8, dtype=torch.float16, seed=13), gaussian(5, 8, dtype=torch.float16, seed=14)
    weight = gaussian(8, dtype=torch.float16, seed=15)
    with sft.emulate():
        _, mean, rstd = aten.native_layer_norm(x, [8], weight, None, 1e-5)
        dx, dweight, dbias = aten.native_layer_norm_backward(dy, x, [8], mean, rstd, weight, None,
                                                             [True, False, False])
        _, dweight_only, dbias_only = aten.native_layer_norm_backward(dy, x, [8], mean, rstd, weight, None,
                                                                      [False, True, True])
    assert dweight is None and dbias is None and dx.shape == x.shape
    assert dweight_only.dtype == torch.float16 and dbias_only.shape == (8,)


# -- dropout -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dropout_mask_and_values_equal_native_torch(dtype):
    x = with_specials(gaussian(40, 37, dtype=dtype, seed=16))
    for p in (0.0, 0.1, 0.5, 1.0):
        torch.manual_seed(123)
        with sft.emulate() as mode:
            out, mask = aten.native_dropout(x, p, True)
            grad = aten.native_dropout_backward(x, mask, 0.0 if p == 1 else 1 / (1 - p))
        assert not mode.fallbacks
        torch.manual_seed(123)
        native_out, native_mask = aten.native_dropout(x, p, True)
        assert torch.equal(mask, native_mask), f"mask p={p}"
        assert_same(out, native_out, f"{dtype} dropout p={p}")
        assert_same(grad, aten.native_dropout_backward(x, native_mask, 0.0 if p == 1 else 1 / (1 - p)),
                    f"{dtype} dropout backward p={p}")
        # The definition: the scale converted to the dtype, one FP32 product (backward: a float32 scale).
        keep = mask.numpy()
        scale = 0.0 if p == 1 else 1 / (1 - p)
        scale_in_dtype = wide(torch.tensor(scale, dtype=torch.float32).to(dtype))
        assert_same(out, rounded(wide(x) * keep.astype(f32) * scale_in_dtype, dtype), f"{dtype} p={p} definition")
    with sft.emulate():
        out, mask = aten.native_dropout(x, 0.5, False)
    assert mask.dtype == torch.bool and mask.all()
    assert_same(out, x, "eval dropout")


def test_functional_dropout_in_training_matches_native():
    x = gaussian(300, dtype=torch.bfloat16, seed=17).requires_grad_()
    torch.manual_seed(5)
    with sft.emulate() as mode:
        y = torch.nn.functional.dropout(x, 0.3, training=True)
        y.backward(torch.ones_like(y))
    assert not mode.fallbacks
    grad, x.grad = x.grad, None
    torch.manual_seed(5)
    native = torch.nn.functional.dropout(x, 0.3, training=True)
    native.backward(torch.ones_like(native))
    assert_same(y.detach(), native.detach(), "F.dropout")
    assert_same(grad, x.grad, "F.dropout backward")


# -- embedding and scatter-adds ------------------------------------------------------------------------------
def scatter_oracle(start: np.ndarray, targets: np.ndarray, sources: np.ndarray, alpha=None) -> np.ndarray:
    """start[targets[i]] += sources[i] in index order, float32 additions (alpha: an fma, done
    exactly in float64 since the products of these FP16/BF16 values are exact)."""
    acc = start.astype(f32).copy()
    for target, source in zip(targets, sources):
        if alpha is None:
            acc[target] = (acc[target] + source).astype(f32)
        else:
            acc[target] = (acc[target].astype(np.float64) + source.astype(np.float64) * alpha).astype(f32)
    return acc


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_embedding_backward_accumulates_in_fp32_in_index_order(dtype):
    indices = torch.tensor([[1, 2, 3, 1], [9, 1, 2, 1], [0, 3, 3, 7]])
    grad = spread(3, 4, 6, dtype=dtype, seed=18)
    embedding = torch.nn.Embedding(10, 6, padding_idx=2).to(dtype)
    with sft.emulate() as mode:
        out = embedding(indices)
        out.backward(grad)
        direct = aten.embedding_dense_backward(grad, indices, 10, -1, False)
    assert not mode.fallbacks
    assert_same(out.detach(), embedding.weight.detach()[indices], "embedding forward (a gather)")
    flat = indices.reshape(-1).numpy()
    rows = wide(grad).reshape(-1, 6)
    keep = flat != 2
    want = scatter_oracle(np.zeros((10, 6), f32), flat[keep], rows[keep])
    assert_same(embedding.weight.grad, rounded(want, dtype), f"{dtype} embedding backward")
    assert (embedding.weight.grad[2] == 0).all()
    assert_same(direct, rounded(scatter_oracle(np.zeros((10, 6), f32), flat, rows), dtype), "no padding_idx")
    # Native torch CPU rounds into the dtype after every addition: it differs only in rows hit
    # more than twice (1 and 3 here; a second addition onto +0 is the same single rounding).
    native = aten.embedding_dense_backward(grad, indices, 10, -1, False)
    differ = (bits(direct) != bits(native)).any(axis=1)
    assert not differ[[0, 7, 9, 2]].any()
    if dtype == torch.float32:
        assert not differ.any()


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_scatter_adds_round_once(dtype):
    """1 + half an ulp + half an ulp: FP32 accumulation gives 1 + ulp; rounding after every
    addition (torch CPU's embedding backward and index_put) gives 1 twice over (ties to even)."""
    half_ulp = 2.0 ** -(FORMATS[dtype].fraction_bits + 1)
    values = torch.tensor([1.0, half_ulp, half_ulp], dtype=dtype)
    index = torch.tensor([0, 0, 0])
    with sft.emulate():
        embedding_grad = aten.embedding_dense_backward(values[:, None], index, 2, -1, False)
        added = torch.zeros(2, dtype=dtype).index_add(0, index, values)
    put = scatter.index_put_accumulate(sft.Machine(), aten.index_put.default,
                                             (torch.zeros(2, dtype=dtype), [index], values, True), {})
    for got in (embedding_grad[0, 0], added[0], put[0]):
        assert got.item() == 1 + 2 * half_ulp
    assert aten.embedding_dense_backward(values[:, None], index, 2, -1, False)[0, 0].item() == 1.0  # native


def test_embedding_backward_refuses_scale_grad_by_freq():
    grad = gaussian(4, 3, dtype=torch.float16, seed=19)
    with sft.emulate(), pytest.raises(sft.NotEmulatedError, match="scale_grad_by_freq"):
        aten.embedding_dense_backward(grad, torch.tensor([0, 1, 1, 2]), 5, -1, True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_add_accumulates_in_fp32(dtype):
    self = gaussian(5, 7, dtype=dtype, seed=20)
    source = spread(40, 7, dtype=dtype, seed=21)
    index = torch.from_numpy(np.random.default_rng(22).integers(0, 5, 40))
    with sft.emulate() as mode:
        plain = self.index_add(0, index, source)
        scaled = self.clone().index_add_(0, index, source, alpha=0.75)
        columns = self.index_add(1, torch.tensor([6, 0, 6]), source[:5, :3])
    assert not mode.fallbacks
    start, rows = wide(self), wide(source)
    assert_same(plain, rounded(scatter_oracle(start, index.numpy(), rows), dtype), f"{dtype} index_add")
    assert_same(scaled, rounded(scatter_oracle(start, index.numpy(), rows, alpha=0.75), dtype), "alpha")
    want = scatter_oracle(start.T, np.array([6, 0, 6]), wide(source[:5, :3]).T).T
    assert_same(columns, rounded(want, dtype), f"{dtype} index_add dim=1")
    # torch 2.13 CPU's index_add (alpha 1) also accumulates in float and rounds once: identical.
    assert_same(plain, self.index_add(0, index, source), "native index_add")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_put_accumulate(dtype):
    machine = sft.Machine()
    self = gaussian(4, 6, dtype=dtype, seed=23)
    rows, columns = torch.tensor([1, 1, 3, 1, 0, 1]), torch.tensor([2, 2, 2, 2, 5, 2])
    values = spread(6, dtype=dtype, seed=24)
    result = scatter.index_put_accumulate(machine, aten.index_put.default, (self, [rows, columns], values,
                                                                                 True), {})
    want = scatter_oracle(wide(self).ravel(), (rows * 6 + columns).numpy(), wide(values)).reshape(4, 6)
    assert_same(result, rounded(want, dtype), f"{dtype} index_put accumulate")
    # In place, with None (a whole dimension) and broadcast values.
    target = self.clone()
    returned = scatter.index_put_accumulate(machine, aten.index_put_.default,
                                                  (target, [None, torch.tensor([0, 0, 4])], values[:3], True), {})
    assert returned is target
    want = scatter_oracle(wide(self).T.copy(), np.array([0, 0, 4]),
                          np.broadcast_to(wide(values[:3]), (4, 3)).T.copy()).T
    assert_same(target, rounded(want, dtype), f"{dtype} index_put_ with None")
    # Native torch rounds after every addition: equal where no element is hit more than once.
    distinct = scatter.index_put_accumulate(machine, aten.index_put.default,
                                                  (self, [torch.tensor([0, 2, 3])], values[:3, None].expand(3, 6),
                                                   True), {})
    assert_same(distinct, self.index_put((torch.tensor([0, 2, 3]),), values[:3, None].expand(3, 6),
                                         accumulate=True), "distinct targets")


def test_unsupported_arguments_are_named():
    x = gaussian(3, 4, dtype=torch.float16, seed=25)
    with sft.emulate(), pytest.raises(sft.NotEmulatedError, match="native_layer_norm.*does not end"):
        aten.native_layer_norm(x, [3], None, None, 1e-5)
    with sft.emulate():  # float64 runs natively, uncounted
        assert torch.var(x.double()).dtype == torch.float64


# -- batch norm and group norm --------------------------------------------------------------------------------
def channel_rows(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(wide(t).reshape(t.shape[0], t.shape[1], -1), 1, 0)).reshape(
        t.shape[1], -1)


def from_channel_rows(rows: np.ndarray, like: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(rows.reshape(like.shape[1], like.shape[0], -1), 0, 1)).reshape(
        like.shape)


def through(values: np.ndarray, dtype) -> np.ndarray:
    """float32 values rounded into dtype and widened back (a stored statistic, as read again)."""
    return wide(rounded(values, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batch_norm_is_its_fp32_definition(dtype):
    """float32 inputs, and float16/bfloat16 inputs in neither torch kernel layout (transposed
    spatial dimensions: torch's TensorIterator path), take the FP32-step definition."""
    x = gaussian(4, 3, 5, 5, dtype=dtype, seed=30)
    x[1, 2] += 100  # a channel with a large mean
    weight, bias = gaussian(3, dtype=dtype, seed=31, shift=1.0), gaussian(3, dtype=dtype, seed=32)
    running_mean, running_var = gaussian(3, dtype=dtype, seed=33), gaussian(3, dtype=dtype, seed=34).abs()
    dy = gaussian(4, 3, 5, 5, dtype=dtype, seed=35, shift=0.0)
    if dtype != torch.float32:
        x, dy = x.transpose(2, 3), dy.transpose(2, 3)
    stored_mean, stored_var = running_mean.clone(), running_var.clone()
    with sft.emulate() as mode:
        y, saved_mean, saved_invstd = aten.native_batch_norm(x, weight, bias, stored_mean, stored_var, True, 0.1,
                                                             1e-5)
        dx, dweight, dbias = aten.native_batch_norm_backward(dy, x, weight, stored_mean, stored_var, saved_mean,
                                                             saved_invstd, True, 1e-5, [True, True, True])
        y_eval, empty_mean, _ = aten.native_batch_norm(x, weight, bias, running_mean, running_var, False, 0.1, 1e-5)
        dx_eval = aten.native_batch_norm_backward(dy, x, weight, running_mean, running_var, None, None, False,
                                                  1e-5, [True, False, False])[0]
    assert not mode.fallbacks and empty_mean.shape == (0,)
    rows, grads, w, b = channel_rows(x), channel_rows(dy), wide(weight)[:, None], wide(bias)[:, None]
    count = rows.shape[1]
    mean = (sequential_sum(rows) / f32(count)).astype(f32)
    squares = sequential_sum(((rows - mean[:, None]).astype(f32) ** 2).astype(f32))
    invstd = (f32(1) / np.sqrt(((squares / f32(count)).astype(f32) + f32(1e-5)).astype(f32))).astype(f32)
    mean_s, invstd_s = through(mean, dtype), through(invstd, dtype)
    centered = (rows - mean_s[:, None]).astype(f32)
    want_y = ((((centered * invstd_s[:, None]).astype(f32)) * w).astype(f32) + b).astype(f32)
    assert_same(y, rounded(from_channel_rows(want_y, x), dtype), f"{dtype} batch norm y")
    assert_same(saved_invstd, rounded(invstd, dtype), "saved invstd")
    momentum, rest = f32(0.1), f32(0.9)
    want_mean = ((momentum * mean_s).astype(f32) + (rest * wide(running_mean)).astype(f32)).astype(f32)
    unbiased = (squares / f32(count - 1)).astype(f32)
    want_var = ((momentum * unbiased).astype(f32) + (rest * wide(running_var)).astype(f32)).astype(f32)
    assert_same(stored_mean, rounded(want_mean, dtype), "running mean")
    assert_same(stored_var, rounded(want_var, dtype), "running var")
    dotp = sequential_sum((centered * grads).astype(f32))[:, None]
    grad_sum = sequential_sum(grads)[:, None]
    k = ((((dotp * invstd_s[:, None]).astype(f32)) * invstd_s[:, None]).astype(f32) / f32(count)).astype(f32)
    want_dx = (((((grads - (grad_sum / f32(count)).astype(f32)).astype(f32) - (centered * k).astype(f32))
                 .astype(f32) * invstd_s[:, None]).astype(f32)) * w).astype(f32)
    assert_same(dx, rounded(from_channel_rows(want_dx, x), dtype), f"{dtype} batch norm dx")
    assert_same(dweight, rounded((dotp * invstd_s[:, None]).astype(f32).ravel(), dtype), "dweight")
    assert_same(dbias, rounded(grad_sum.ravel(), dtype), "dbias")
    # Evaluation: the running statistics, invstd in FP32.
    eval_invstd = (f32(1) / np.sqrt((wide(running_var) + f32(1e-5)).astype(f32))).astype(f32)[:, None]
    eval_centered = (rows - wide(running_mean)[:, None]).astype(f32)
    want_eval = ((((eval_centered * eval_invstd).astype(f32)) * w).astype(f32) + b).astype(f32)
    assert_same(y_eval, rounded(from_channel_rows(want_eval, x), dtype), f"{dtype} batch norm eval")
    want_dx_eval = (((grads * eval_invstd).astype(f32)) * w).astype(f32)
    assert_same(dx_eval, rounded(from_channel_rows(want_dx_eval, x), dtype), f"{dtype} batch norm eval dx")


def group_norm_oracle(x, weight, bias, groups, eps=1e-5):
    """(y, mean, rstd) per channel_norms.native_group_norm's steps."""
    samples, channels = x.shape[:2]
    rows = wide(x).reshape(samples * groups, -1)
    mean, var = variance_oracle(rows, 0)
    rstd = (f32(1) / np.sqrt((var + f32(eps)).astype(f32))).astype(f32)
    w, b = wide(weight).reshape(1, channels, 1), wide(bias).reshape(1, channels, 1)
    y = ((rows - mean[:, None]).astype(f32) * rstd[:, None]).astype(f32).reshape(samples, channels, -1)
    return ((y * w).astype(f32) + b).astype(f32).reshape(x.shape), mean, rstd


def group_norm_backward_oracle(dy, x, mean, rstd, weight, groups):
    """(dx, dweight, dbias): torch CPU's formula in float32 steps, from the saved statistics."""
    samples, channels = x.shape[:2]
    per_group = channels // groups
    xs, grads = wide(x).reshape(samples, channels, -1), wide(dy).reshape(samples, channels, -1)
    ds = sequential_sum((grads * xs).astype(f32)).reshape(samples, groups, per_group)
    db = sequential_sum(grads).reshape(samples, groups, per_group)
    wg = wide(weight).reshape(1, groups, per_group)
    mu, r = mean.reshape(samples, groups, 1), rstd.reshape(samples, groups, 1)
    ds_g = sequential_sum((ds * wg).astype(f32))[..., None]
    db_g = sequential_sum((db * wg).astype(f32))[..., None]
    s = (f32(1) / f32(per_group * xs.shape[-1])).astype(f32)
    c2 = ((db_g * mu).astype(f32) - ds_g).astype(f32)
    for _ in range(3):
        c2 = (c2 * r).astype(f32)
    c2 = (c2 * s).astype(f32)
    c3 = ((-c2 * mu).astype(f32) - (((db_g * r).astype(f32)) * s).astype(f32)).astype(f32)
    shape = (samples, groups, per_group, -1)
    first = (((r[..., None] * wg[..., None]).astype(f32)) * grads.reshape(shape)).astype(f32)
    dx = ((first + (c2[..., None] * xs.reshape(shape)).astype(f32)).astype(f32) + c3[..., None]).astype(f32)
    terms = ((ds - (db * mu).astype(f32)).astype(f32) * r).astype(f32).reshape(samples, channels)
    return (dx.reshape(x.shape), sequential_sum(np.ascontiguousarray(terms.T)),
            sequential_sum(np.ascontiguousarray(db.reshape(samples, channels).T)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_is_its_fp32_definition(dtype):
    x = gaussian(12, 6, 4, 5, dtype=dtype, seed=40)
    x[2, :2] += 50
    weight, bias = gaussian(6, dtype=dtype, seed=41, shift=1.0), gaussian(6, dtype=dtype, seed=42)
    dy = gaussian(12, 6, 4, 5, dtype=dtype, seed=43, shift=0.0)
    with sft.emulate() as mode:
        y, mean, rstd = aten.native_group_norm(x, weight, bias, 12, 6, 20, 3, 1e-5)
        dx, dweight, dbias = aten.native_group_norm_backward(dy, x, mean, rstd, weight, 12, 6, 20, 3,
                                                             [True, True, True])
    assert not mode.fallbacks
    want_y, want_mean, want_rstd = group_norm_oracle(x, weight, bias, 3)
    assert_same(y, rounded(want_y, dtype), f"{dtype} group norm y")
    assert_same(mean, rounded(want_mean, dtype).reshape(12, 3), "group norm mean")
    assert_same(rstd, rounded(want_rstd, dtype).reshape(12, 3), "group norm rstd")
    # The backward reads the saved statistics as torch hands them over (rounded to their dtype).
    want = group_norm_backward_oracle(dy, x, wide(mean).ravel(), wide(rstd).ravel(), weight, 3)
    for got, expected, name in zip((dx, dweight, dbias), want, ("dx", "dweight", "dbias")):
        assert_same(got, rounded(expected, dtype).reshape(got.shape), f"{dtype} group norm {name}")


# Measured against torch 2.13 CPU on these shapes: float16/bfloat16 batch norm and group norm
# outputs and gradients differ in at most 4 of 48-600 elements (bfloat16 BatchNorm1d: 4 of 48
# outputs, 7 of 48 input gradients); float32 within 1e-6 relative.
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batch_and_group_norm_modules_close_to_native_torch(dtype):
    for make in (lambda: torch.nn.BatchNorm2d(3), lambda: torch.nn.GroupNorm(3, 6)):
        torch.manual_seed(0)
        module = make().to(dtype)
        with torch.no_grad():
            module.weight.normal_()
            module.bias.normal_()
        channels = module.weight.numel()
        x = gaussian(4, channels, 5, 5, dtype=dtype, seed=44).requires_grad_()
        dy = gaussian(4, channels, 5, 5, dtype=dtype, seed=45, shift=0.0)
        native = copy.deepcopy(module)
        with sft.emulate(strict=True):
            y = module(x)
            y.backward(dy)
        got = [y.detach(), x.grad.clone()] + [p.grad for p in module.parameters()]
        x.grad = None
        y_native = native(x)
        y_native.backward(dy)
        want = [y_native.detach(), x.grad] + [p.grad for p in native.parameters()]
        for g, w in zip(got, want):
            if dtype == torch.float32:
                assert relative_error(g, w) <= 2e-6
            else:
                assert mismatches(g, w) <= max(2, g.numel() // 50)
                assert relative_error(g, w) <= 2.0 ** -(FORMATS[dtype].fraction_bits - 1)


# -- batch norm: torch CPU's kernels, bit for bit ---------------------------------------------------------
# (shape, memory format) covering both kernels: contiguous with spatial sizes that leave a scalar tail
# after the 16-element vector blocks (35 = 32 + 3, 40 = 32 + 8) or have none (16), one channel,
# channels-last 2d/3d with vector and tail channels (24 = 16 + 8), and (N, C), which torch runs as
# channels-last: with more rows than threads (per-thread partial sums) and with fewer.
BATCH_NORM_SHAPES = [
    ((6, 4, 5, 7), None), ((3, 2, 40), None), ((2, 3, 16), None), ((5, 1, 3, 3), None),
    ((4, 24, 3, 5), torch.channels_last), ((2, 3, 2, 3, 4), torch.channels_last_3d),
    ((16, 40), None), ((2, 40), None), ((3, 50, 1, 1), None),
]


def batch_norm_case(shape, layout, dtype, parameters, seed):
    x = gaussian(*shape, dtype=dtype, seed=seed, scale=2.0, shift=40.0 if seed % 2 else 0.5)
    dy = gaussian(*shape, dtype=dtype, seed=seed + 1, shift=0.0)
    if layout is not None:
        x, dy = x.contiguous(memory_format=layout), dy.contiguous(memory_format=layout)
    channels = shape[1]
    weight, bias = (gaussian(channels, dtype=parameters, seed=seed + k) for k in (2, 3))
    running_mean = gaussian(channels, dtype=parameters, seed=seed + 4)
    running_var = gaussian(channels, dtype=parameters, seed=seed + 5).abs() + 0.5
    return x, dy, weight, bias, running_mean, running_var


def batch_norm_both_ways(x, dy, weight, bias, running_mean, running_var, training, threads=1):
    """native_batch_norm (updating copies of the running statistics) and its backward, native and
    emulated (``threads``: the machine's torch thread count): two lists of (name, tensor)."""
    runs = []
    for emulated in (False, True):
        stats = [running_mean.clone(), running_var.clone()]
        with sft.emulate(threads=threads) if emulated else torch.no_grad():
            y, mean, invstd = aten.native_batch_norm(x, weight, bias, *stats, training, 0.1, 1e-5)
            grads = aten.native_batch_norm_backward(dy, x, weight, *stats, mean if training else None,
                                                    invstd if training else None, training, 1e-5,
                                                    [True, True, True])
        runs.append([("y", y), ("save_mean", mean), ("save_invstd", invstd), ("running_mean", stats[0]),
                     ("running_var", stats[1]), ("dx", grads[0]), ("dweight", grads[1]), ("dbias", grads[2])])
    return runs


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("parameters", ["same", "float32"])
def test_batch_norm_is_torch_cpus_kernels_bit_for_bit(dtype, parameters):
    """Forward (training and evaluation), running statistics and backward against torch 2.13 CPU,
    bit for bit and stride for stride, at two and three threads (the channels-last kernels' partial
    sums depend on the thread count: the machine's ``threads`` says which to reproduce)."""
    parameters = dtype if parameters == "same" else torch.float32
    threads = torch.get_num_threads()
    compared = 0
    try:
        for thread_count in (2, 3):
            torch.set_num_threads(thread_count)
            for index, (shape, layout) in enumerate(BATCH_NORM_SHAPES):
                case = batch_norm_case(shape, layout, dtype, parameters, seed=60 + index + thread_count)
                for training in (True, False):
                    native, emulated = batch_norm_both_ways(*case, training, threads=thread_count)
                    for (name, want), (_, got) in zip(native, emulated):
                        what = f"{shape} {layout} training={training} threads={thread_count} {name}"
                        assert got.stride() == want.stride(), what
                        assert_same(got, want, what)
                        compared += got.numel()
    finally:
        torch.set_num_threads(threads)
    assert compared > 5000
