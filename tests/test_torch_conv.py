"""softfloat16.torch: convolutions and pooling, against independent oracles of their documented
orders (numpy float32 loops; exact rationals for FP32 products), against native torch CPU
(pooling: bit for bit; convolutions: within the bound of their accumulation), and a small CNN
trained under strict emulation."""
from __future__ import annotations

import contextlib
import itertools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import softfloat16 as sf  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch.tensors import bits, from_bits  # noqa: E402

FORMATS = {torch.float16: sf.fp16, torch.bfloat16: sf.bf16, torch.float32: sf.fp32}
NUMPY = {torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16, torch.float32: np.float32}
HALVES = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def gaussian(*shape, dtype, seed, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * scale).to(dtype)


def as32(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy()


def assert_same_bits(got: torch.Tensor, want32: np.ndarray, what: str):
    """``got`` equals the FP32 oracle ``want32`` rounded once into got's format (numpy's and
    ml_dtypes' float32 conversions round to nearest even), NaN matching any NaN."""
    want = torch.from_numpy(np.ascontiguousarray(want32, dtype=np.float32).astype(NUMPY[got.dtype]).astype(np.float32))
    want = want.to(got.dtype)  # exact: the value is already in the format
    assert got.shape == want.shape, (what, got.shape, want.shape)
    fmt = FORMATS[got.dtype]
    g, w = bits(got).ravel(), bits(want).ravel()
    nan = fmt.is_nan(g)
    assert np.array_equal(nan, fmt.is_nan(w)), f"{what}: NaN class differs at {np.flatnonzero(nan != fmt.is_nan(w))}"
    differ = (g != w) & ~nan
    if differ.any():
        i = np.flatnonzero(differ)[:5]
        pytest.fail(f"{what}: {int(differ.sum())} of {g.size} differ, first at {i}: got {[hex(x) for x in g[i]]}, "
                    f"oracle {[hex(x) for x in w[i]]}")


# -- the oracle: explicit loops in the documented orders ---------------------------------------------
def _round32(value: Fraction) -> np.float32:
    """An exact rational rounded to the nearest float32, ties to even (normal and subnormal range)."""
    if value == 0:
        return np.float32(0.0)
    magnitude = abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if magnitude < Fraction(2) ** exponent:
        exponent -= 1
    exponent = max(exponent, -126)
    scale = Fraction(2) ** (23 - exponent)
    rounded = round(magnitude * scale)  # Fraction.__round__: half to even
    return np.float32(float(rounded / scale) * (1 if value > 0 else -1))


_FMA32 = np.frompyfunc(lambda acc, a, b: _round32(Fraction(float(acc)) + Fraction(float(a)) * Fraction(float(b))), 3, 1)


def multiply_add(dtype, accumulate="fp32"):
    """One accumulation step ``acc + a * b``, rounded once into the accumulation format, on
    float32 arrays. FP16/BF16 operands: the float32 product is exact (at most 22 significant bits,
    in range here), so numpy's float32 ``acc + a * b`` rounds once. FP32 operands: products need
    48 bits, so the step is done on exact rationals (an fma), elementwise. An FP16 accumulator
    (FP16 operands): the sum is exact in float64 (its bits span less than 53 here), then numpy
    rounds float64 to float16 once."""
    if accumulate == "fp16":
        return lambda acc, a, b: (np.float64(acc) + np.float64(a) * np.float64(b)).astype(np.float16).astype(np.float32)
    if dtype != torch.float32:
        return lambda acc, a, b: (acc + np.float32(a) * np.float32(b)).astype(np.float32)
    return lambda acc, a, b: np.asarray(_FMA32(*np.broadcast_arrays(acc, a, b)), dtype=np.float32)


def _out_sizes(sizes, kernel, stride, padding, dilation):
    return tuple((s + 2 * p - d * (k - 1) - 1) // st + 1 for s, k, st, p, d in zip(sizes, kernel, stride, padding,
                                                                                 dilation))


def _window(offset, out_sizes, stride, dilation):
    """Slices of a padded input read by kernel offset ``offset`` for every output position."""
    return tuple(slice(k * d, k * d + s * (o - 1) + 1, s) for k, d, s, o in zip(offset, dilation, stride, out_sizes))


def oracle_forward(x, w, b, stride, padding, dilation, groups, step):
    """y[n, co, o] = b[co] + sum over (ci, k) row-major of xpad * w, float32 from +0."""
    kernel = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out_sizes = _out_sizes(x.shape[2:], kernel, stride, padding, dilation)
    per_in, per_out = w.shape[1], w.shape[0] // groups
    y = np.zeros((x.shape[0], w.shape[0]) + out_sizes, np.float32)
    for co in range(w.shape[0]):
        g = co // per_out
        acc = np.zeros((x.shape[0],) + out_sizes, np.float32)
        for ci in range(per_in):
            for offset in itertools.product(*(range(k) for k in kernel)):
                patch = xp[(slice(None), g * per_in + ci) + _window(offset, out_sizes, stride, dilation)]
                acc = step(acc, patch, w[(co, ci) + offset])
        y[:, co] = acc if b is None else (acc + b[co]).astype(np.float32)
    return y


def oracle_weight_grad(dy, x, kernel, stride, padding, dilation, groups, step):
    """dw[co, ci, k] = sum over (n, o) row-major of dy[n, co, o] * xpad[n, g*C_g + ci, o*s + k*d]."""
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    per_in, per_out = x.shape[1] // groups, dy.shape[1] // groups
    dw = np.zeros((dy.shape[1], per_in) + tuple(kernel), np.float32)
    group_of = np.arange(dy.shape[1]) // per_out
    for n in range(dy.shape[0]):
        for o in itertools.product(*(range(s) for s in dy.shape[2:])):
            patch = xp[(n, slice(None)) + tuple(slice(oi * s, oi * s + d * (k - 1) + 1, d)
                                                for oi, s, d, k in zip(o, stride, dilation, kernel))]
            patch = patch.reshape((groups, per_in) + tuple(kernel))[group_of]  # (C_out, C_g, *K)
            dw = step(dw, dy[(n, slice(None)) + o].reshape((-1,) + (1,) * (1 + len(kernel))), patch)
    return dw


def oracle_input_grad(dy, w, in_sizes, stride, padding, dilation, groups, step):
    """t[n, ci, o, k] = sum over co (ascending) of dy * w; then at each input position the t of
    the kernel offsets in row-major order added from +0 in float32; padding dropped."""
    kernel, dims = w.shape[2:], w.ndim - 2
    out_sizes = dy.shape[2:]
    per_in, per_out = w.shape[1], w.shape[0] // groups
    padded = np.zeros((dy.shape[0], per_in * groups) + tuple(s + 2 * p for s, p in zip(in_sizes, padding)), np.float32)
    for g in range(groups):
        t = np.zeros((dy.shape[0], per_in) + tuple(out_sizes) + tuple(kernel), np.float32)
        for co in range(g * per_out, (g + 1) * per_out):
            grad = dy[:, co].reshape((dy.shape[0], 1) + tuple(out_sizes) + (1,) * dims)
            t = step(t, grad, w[co][(None, slice(None)) + (None,) * dims])
        for offset in itertools.product(*(range(k) for k in kernel)):
            target = (slice(None), slice(g * per_in, (g + 1) * per_in)) + _window(offset, out_sizes, stride, dilation)
            padded[target] = padded[target] + t[(Ellipsis,) + offset]
    return padded[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(padding, in_sizes))]


def oracle_bias_grad(dy, step):
    """sum over (n, o) row-major of dy[n, co, o] (terms dy * 1), from +0."""
    rows = np.moveaxis(dy, 1, 0).reshape(dy.shape[1], -1)
    acc = np.zeros(dy.shape[1], np.float32)
    for j in range(rows.shape[1]):
        acc = step(acc, rows[:, j], np.float32(1))
    return acc


# -- convolutions against the oracle --------------------------------------------------------------------
CONV_CASES = {
    "1d stride 2 padding 2": ((2, 3, 11), (4, 3, 3), dict(stride=(2,), padding=(2,), dilation=(1,), groups=1)),
    "2d padding 1": ((2, 3, 6, 5), (4, 3, 3, 3), dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)),
    "2d stride dilation groups": ((1, 4, 9, 8), (6, 2, 2, 3), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 2),
                                                                   groups=2)),
    "2d depthwise": ((2, 3, 5, 5), (3, 1, 3, 3), dict(stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=3)),
    "3d": ((1, 2, 4, 3, 3), (2, 2, 2, 2, 2), dict(stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 1), groups=1)),
}


def conv_run(dtype, x, w, b, geometry, transposed=False, output_padding=None, emulate=True, accumulate="fp32"):
    """Forward and backward of F.conv{1,2,3}d (or conv_transpose), under the mode or natively:
    (y, dx, dw, db, dy) for an upstream gradient dy of ``dtype`` values (the same values for
    every ``x.dtype``)."""
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    kwargs = dict(stride=geometry["stride"], padding=geometry["padding"], dilation=geometry["dilation"],
                  groups=geometry["groups"])
    dims = x.dim() - 2
    if transposed:
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[dims - 1]
        kwargs["output_padding"] = output_padding
    else:
        conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    with sft.emulate(accumulate=accumulate) if emulate else contextlib.nullcontext() as mode:
        y = conv(x, w, b, **kwargs)
        dy = gaussian(*y.shape, dtype=dtype, seed=99).to(x.dtype)
        y.backward(dy)
    assert mode is None or not mode.fallbacks
    return y.detach(), x.grad, w.grad, b.grad, dy


# FP16/BF16 with FP32 accumulation check the exact products and the single rounding; FP32 (whose
# rounding hides nothing) and an FP16 accumulator check the order of every sum.
@pytest.mark.parametrize("dtype, accumulate", [(torch.float16, "fp32"), (torch.bfloat16, "fp32"),
                                               (torch.float32, "fp32"), (torch.float16, "fp16")], ids=str)
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_convolution_forward_and_backward_equal_the_documented_order(case, dtype, accumulate):
    x_shape, w_shape, geometry = CONV_CASES[case]
    x = gaussian(*x_shape, dtype=dtype, seed=1)
    w = gaussian(*w_shape, dtype=dtype, seed=2, scale=0.5)
    b = gaussian(w_shape[0], dtype=dtype, seed=3)
    y, dx, dw, db, dy = conv_run(dtype, x, w, b, geometry, accumulate=accumulate)
    step = multiply_add(dtype, accumulate)
    args = (geometry["stride"], geometry["padding"], geometry["dilation"], geometry["groups"], step)
    x32, w32, dy32 = as32(x), as32(w), as32(dy)
    assert_same_bits(y, oracle_forward(x32, w32, as32(b), *args), f"{case} forward")
    assert_same_bits(dw, oracle_weight_grad(dy32, x32, w_shape[2:], *args), f"{case} grad_weight")
    assert_same_bits(dx, oracle_input_grad(dy32, w32, x_shape[2:], *args), f"{case} grad_input")
    assert_same_bits(db, oracle_bias_grad(dy32, step), f"{case} grad_bias")


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_transposed_convolution_is_the_adjoint(dtype):
    """conv_transpose forward = the input gradient of the regular convolution (+ bias); its
    backward = the regular forward and the regular weight gradient with x and dy exchanged."""
    geometry = dict(stride=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2)
    x = gaussian(2, 4, 4, 3, dtype=dtype, seed=4)
    w = gaussian(4, 3, 3, 2, dtype=dtype, seed=5, scale=0.5)  # (C_in, C_out / groups, *K)
    b = gaussian(6, dtype=dtype, seed=6)
    y, dx, dw, db, dy = conv_run(dtype, x, w, b, geometry, transposed=True, output_padding=(1, 2))
    step = multiply_add(dtype)
    args = (geometry["stride"], geometry["padding"], geometry["dilation"], geometry["groups"], step)
    x32, w32, dy32 = as32(x), as32(w), as32(dy)
    forward = oracle_input_grad(x32, w32, y.shape[2:], *args)
    assert_same_bits(y, forward + as32(b).reshape(1, -1, 1, 1), "transposed forward")
    assert_same_bits(dx, oracle_forward(dy32, w32, None, *args), "transposed grad_input")
    assert_same_bits(dw, oracle_weight_grad(x32, dy32, w.shape[2:], *args), "transposed grad_weight")
    assert_same_bits(db, oracle_bias_grad(dy32, step), "transposed grad_bias")


def test_special_values_propagate_as_in_the_oracle():
    """Subnormals, signed zeros, infinities and NaNs in the input (FP16): the same bits as the
    oracle where it is not NaN, NaN where it is NaN (NaN payloads are not propagated)."""
    x_shape, w_shape, geometry = CONV_CASES["2d padding 1"]
    x_bits = bits(gaussian(*x_shape, dtype=torch.float16, seed=7)).copy().reshape(-1)
    specials = [0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E01, 0x7BFF]
    x_bits[::7] = np.resize(np.array(specials, np.uint16), x_bits[::7].size)
    x = from_bits(x_bits, torch.float16, x_shape)
    w = gaussian(*w_shape, dtype=torch.float16, seed=8, scale=0.5)
    b = gaussian(w_shape[0], dtype=torch.float16, seed=9)
    y, _, dw, _, dy = conv_run(torch.float16, x, w, b, geometry)
    step = multiply_add(torch.float16)
    args = (geometry["stride"], geometry["padding"], geometry["dilation"], geometry["groups"], step)
    with np.errstate(invalid="ignore", over="ignore"):
        assert_same_bits(y, oracle_forward(as32(x), as32(w), as32(b), *args), "forward with specials")
        assert_same_bits(dw, oracle_weight_grad(as32(dy), as32(x), w_shape[2:], *args), "grad_weight with specials")
    assert np.isnan(as32(y)).any() and np.isinf(as32(y)).any()  # the case exercises both


@pytest.mark.parametrize("order", ["pairwise", "tensorcore"])
def test_the_mode_order_and_accumulation_reach_the_convolution_gemm(order):
    """The forward is a matmul of the im2col rows with the weights: under other orders and FP16
    accumulation it equals sf.linalg.matmul of the same operands."""
    x = gaussian(1, 3, 5, 4, dtype=torch.float16, seed=10)
    w = gaussian(2, 3, 3, 3, dtype=torch.float16, seed=11)
    core = {"tensor_core": "h100"} if order == "tensorcore" else {}  # linalg.matmul's default unit
    with sft.emulate(order=order, accumulate="fp16", **core):
        y = F.conv2d(x, w)
    columns = F.unfold(x.float(), 3).to(torch.float16)[0].T  # (positions, C * kh * kw), exact copies
    want = sf.linalg.matmul(bits(columns), bits(w.reshape(2, -1).T.contiguous()), sf.fp16, accumulate="fp16",
                            order=order)
    assert np.array_equal(bits(y).reshape(2, -1), want.T)


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
def test_convolutions_agree_with_native_torch_within_their_rounding(dtype):
    """Against native torch CPU (oneDNN/its own orders and, for FP16 backward, intermediate
    roundings in FP16) the difference is bounded by the accumulation error both sides may make:
    |mode - torch| <= (terms per col2im position + 2) * 2**-p * sum |terms| (p: the format's
    precision); and the mode's error against float64 is at most one rounding plus 2**-24 per term."""
    geometry = dict(stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2)
    x = gaussian(2, 4, 9, 8, dtype=dtype, seed=12)
    w = gaussian(6, 2, 3, 3, dtype=dtype, seed=13, scale=0.3)
    b = gaussian(6, dtype=dtype, seed=14)
    mode = conv_run(dtype, x, w, b, geometry)
    native = conv_run(dtype, x, w, b, geometry, emulate=False)
    exact = conv_run(dtype, x.double(), w.double(), b.double(), geometry, emulate=False)
    # the sums of |terms|: the same computation on absolute values (and |dy|)
    xa, wa, ba = (t.double().abs().requires_grad_() for t in (x, w, b))
    ya = F.conv2d(xa, wa, ba, **geometry)
    ya.backward(mode[4].double().abs())
    scales = [ya.detach(), xa.grad, wa.grad, mode[4].double().abs().sum((0, 2, 3))]
    precision = FORMATS[dtype].precision
    terms = 2 * 9 + 2  # the longest reduction: forward's C_g * kh * kw, bias
    for name, got, theirs, want, scale in zip(("y", "dx", "dw", "db"), mode[:4], native[:4], exact[:4], scales):
        got, theirs = got.double(), theirs.double()
        assert ((got - want).abs() <= 2.0 ** -precision * want.abs() + 2.0 ** -24 * 4 * terms * scale).all(), name
        assert ((got - theirs).abs() <= (9 + 2) * 2.0 ** (1 - precision) * scale + 1e-30).all(), name


def test_convolution_reports_bad_arguments_and_leaves_float64_to_torch():
    x, w = gaussian(1, 3, 5, 5, dtype=torch.float16, seed=15), gaussian(2, 4, 3, 3, dtype=torch.float16, seed=16)
    with sft.emulate(), pytest.raises(RuntimeError, match=r"aten.convolution: .*weight \(2, 4, 3, 3\)"):
        F.conv2d(x, w)  # 3 input channels, a weight for 4
    with sft.emulate() as mode:
        y = F.conv2d(x.double(), w[:, :3].double())
    assert y.dtype == torch.float64 and not mode.fallbacks
    assert torch.equal(y, F.conv2d(x.double(), w[:, :3].double()))


def test_convolution_backward_computes_what_output_mask_asks_for():
    x, w = gaussian(2, 4, 6, 5, dtype=torch.bfloat16, seed=20), gaussian(6, 2, 3, 3, dtype=torch.bfloat16, seed=21)
    dy = gaussian(2, 6, 4, 3, dtype=torch.bfloat16, seed=22)
    geometry = ([1, 1], [0, 0], [1, 1], False, [0, 0], 2)
    backward = torch.ops.aten.convolution_backward.default
    with sft.emulate():
        every = backward(dy, x, w, [6], *geometry, [True, True, True])
        some = backward(dy, x, w, [6], *geometry, [True, False, True])
        forward = F.conv2d(x, w, groups=2)
        old_entry = torch.ops.aten._convolution.default(x, w, None, *geometry, False, False, True, True)
    assert some[1] is None and torch.equal(some[0], every[0]) and torch.equal(some[2], every[2])
    assert torch.equal(old_entry, forward)


# -- pooling against native torch CPU -----------------------------------------------------------------
def special_input(dtype, shape, seed):
    """Gaussian values with an eighth replaced by subnormals, signed zeros, infinities, quiet and
    signaling NaNs with payloads, the largest finite value, and repeated values (ties)."""
    fmt = FORMATS[dtype]
    patterns = bits(gaussian(*shape, dtype=dtype, seed=seed, scale=3)).copy().reshape(-1)
    top = fmt.sign_mask
    specials = [1, 1 | top, fmt.min_normal - 1, 0, top, fmt.inf, fmt.inf | top, fmt.default_nan | 3,
                fmt.default_nan | 5 | top, fmt.inf | 1, fmt.max_finite, fmt.one, fmt.one]
    rng = np.random.default_rng(seed)
    pick = rng.choice(patterns.size, patterns.size // 8, replace=False)
    patterns[pick] = np.array(specials, dtype=fmt.dtype)[rng.integers(0, len(specials), pick.size)]
    return from_bits(patterns, dtype, shape)


POOLS = {
    "max 3/2 pad 1 ceil": lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True),
    "max 3/1 dilation 2": lambda t: F.max_pool2d(t, (3, 2), 1, 1, dilation=2, return_indices=True),
    "max1d": lambda t: F.max_pool1d(t.flatten(2), 4, 3, 2, return_indices=True),
    "max3d": lambda t: F.max_pool3d(t, 2, 1, 1, return_indices=True),
    "adaptive max": lambda t: F.adaptive_max_pool2d(t, (4, 3), return_indices=True),
    "avg 3/2 pad 1 ceil exclude pad": lambda t: (F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False),),
    "avg 3/1 pad 1": lambda t: (F.avg_pool2d(t, 3, 1, 1),),
    "avg divisor 7": lambda t: (F.avg_pool2d(t, 2, divisor_override=7),),
    "avg1d": lambda t: (F.avg_pool1d(t.flatten(2), 4, 3, 2, ceil_mode=True),),
    "adaptive avg": lambda t: (F.adaptive_avg_pool2d(t, (4, 3)),),
    "adaptive avg 3d": lambda t: (F.adaptive_avg_pool3d(t, (2, 4, 5)),),
    "avg3d": lambda t: (F.avg_pool3d(t, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True, count_include_pad=False),),
}


# (torch CPU has no FP16/BF16 avg_pool3d)
@pytest.mark.parametrize("name, dtype", [(name, dtype) for name in POOLS for dtype in HALVES + [torch.float32]
                                         if name != "avg3d" or dtype == torch.float32], ids=str)
def test_pooling_matches_torch_cpu_bit_for_bit(name, dtype):
    """Values, indices and gradients equal native torch's bits. NaN payloads aside: torch
    canonicalises BF16 NaNs, keeps FP32 signaling NaNs in max pooling (the mode quiets them) and
    drops FP16 payloads in 3-d adaptive average pooling's gradient; the mode's sums return the
    default NaN. (FP16 max pooling and the other FP16 gradients: payloads equal too.)"""
    x = special_input(dtype, (2, 3, 7, 6), seed=17)
    pool = POOLS[name]
    x_native, x_mode = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = pool(x_native)
    grad = special_input(dtype, want[0].shape, seed=18)
    want[0].backward(grad)
    with sft.emulate() as mode:
        got = pool(x_mode)
        got[0].backward(grad)
    assert not mode.fallbacks
    fmt = FORMATS[dtype]
    for what, g, w in [("values", got[0], want[0]), ("grad", x_mode.grad, x_native.grad)]:
        exact_nans = dtype == torch.float16 and (what == "grad" or "max" in name) and name != "adaptive avg 3d"
        g, w = bits(g.detach()).ravel(), bits(w.detach()).ravel()
        assert np.array_equal(fmt.is_nan(g), fmt.is_nan(w)), f"{name} {what}: NaN class"
        differ = (g != w) & ~(fmt.is_nan(w) & (not exact_nans))
        assert not differ.any(), f"{name} {what}: {int(differ.sum())} of {g.size} differ"
    assert fmt.is_nan(bits(got[0].detach())).any()  # the NaN rules were exercised
    if len(want) == 2:
        assert torch.equal(got[1], want[1]), f"{name}: indices"


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
@pytest.mark.parametrize("mode, padding", [("reflect", (3, 1, 1, 2)), ("replicate", (4, 2, 5, 1)),
                                           ("reflect", (2, 1)), ("replicate", (3, 3, 1, 4, 2, 2))], ids=str)
def test_padding_modes_and_their_gradients_match_torch_cpu_bit_for_bit(mode, padding, dtype):
    """nn.Conv2d(padding_mode="reflect" / "replicate") pads first: the padding copies (exact),
    its gradient sums the copies' gradients (replicated corners: dozens of terms) as torch does."""
    shape = {2: (2, 3, 9), 4: (2, 3, 6, 5), 6: (1, 2, 3, 4, 5)}[len(padding)]
    x = gaussian(*shape, dtype=dtype, seed=23)
    x_native, x_mode = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = F.pad(x_native, padding, mode=mode)
    grad = gaussian(*want.shape, dtype=dtype, seed=24, scale=3)
    want.backward(grad)
    with sft.emulate() as emulation:
        got = F.pad(x_mode, padding, mode=mode)
        got.backward(grad)
    assert not emulation.fallbacks
    assert np.array_equal(bits(got.detach()), bits(want.detach()))
    assert np.array_equal(bits(x_mode.grad), bits(x_native.grad))


def test_max_pool_picks_the_first_maximum_and_the_last_nan():
    x = from_bits(np.array([[0x8000, 0x0000, 0x3C00, 0x3C00], [0x7E01, 0x3C00, 0x7C05, 0xFC00]], np.uint16),
                  torch.float16, (1, 1, 2, 4))
    with sft.emulate():
        values, indices = F.max_pool2d(x, (1, 2), return_indices=True)
    assert indices.tolist() == [[[[0, 2], [4, 6]]]]  # -0 and +0 tie: the first; 1 and 1: the first
    assert [hex(v) for v in bits(values).ravel()] == ["0x8000", "0x3c00", "0x7e01", "0x7e05"]  # last NaN, quieted


def test_average_pooling_sums_as_the_mode_sums():
    """A window covering the plane is the plane's mean: under FP16 accumulation and pairwise
    order avg_pool2d gives the bits of mean() (both sum as reductions.row_sums)."""
    x = gaussian(2, 3, 6, 5, dtype=torch.float16, seed=19, scale=100)
    with sft.emulate(accumulate="fp16", order="pairwise"):
        pooled = F.avg_pool2d(x, (6, 5), divisor_override=30)
        mean = x.mean((2, 3), keepdim=True)
    with sft.emulate():
        default = F.avg_pool2d(x, (6, 5))
    assert torch.equal(bits_tensor(pooled), bits_tensor(mean))
    assert not torch.equal(bits_tensor(pooled), bits_tensor(default))  # the accumulation format mattered


def bits_tensor(t):
    return torch.from_numpy(bits(t).astype(np.int64))


# -- a small CNN, forward and backward ----------------------------------------------------------------
def cnn(dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 8, 3, padding=1, stride=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d((2, 2)),
        torch.nn.Flatten(), torch.nn.Linear(32, 5)).to(dtype)
    x = torch.randn(4, 3, 10, 10).to(dtype)
    labels = torch.tensor([0, 3, 1, 4])
    return model, x, labels


def cnn_step(dtype, threads):
    sf.set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        model, x, labels = cnn(dtype)
        with sft.emulate(strict=True) as mode:
            loss = F.cross_entropy(model(x), labels)
            loss.backward()
        assert not mode.fallbacks
    finally:
        sf.set_num_threads(None)
    return [loss.detach()] + [p.grad for p in model.parameters()]


# Largest relative error against native FP32 torch seen (torch 2.13, this CNN): loss 1.8e-4 (FP16),
# 8.6e-4 (BF16); gradients (max |error| / max |FP32 gradient| per parameter) 1.7e-3 (FP16), 1.4e-2 (BF16).
FP32_TOLERANCE = {torch.float16: (2e-3, 1e-2), torch.bfloat16: (8e-3, 5e-2)}


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_a_cnn_runs_strictly_deterministically_and_close_to_fp32(dtype):
    first, again, two_threads = cnn_step(dtype, 1), cnn_step(dtype, 1), cnn_step(dtype, 2)
    for run in (again, two_threads):
        for got, want in zip(run, first):
            assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    model, x, labels = cnn(dtype)
    reference = model.float()
    loss32 = F.cross_entropy(reference(x.float()), labels)
    loss32.backward()
    loss_tolerance, grad_tolerance = FP32_TOLERANCE[dtype]
    assert abs(first[0].item() - loss32.item()) <= loss_tolerance * abs(loss32.item())
    for got, parameter in zip(first[1:], reference.parameters()):
        want = parameter.grad
        assert (got.float() - want).abs().max() <= grad_tolerance * want.abs().max()
