"""The op families of the torch mode added for Llama/Mistral/Mixtral models: sin/cos/tan against a
correctly rounded oracle (mpmath), cumsum/cumprod, scatter_add/scatter_reduce/histc and _grouped_mm
bit for bit against torch CPU's own kernels (the semantics they model)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")

import softfloat16 as sf  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16 import fp32trig  # noqa: E402

INTEGER_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _identical(mode_result, torch_result) -> bool:
    """The same bits, NaN payloads aside (NaN where the other is NaN)."""
    view = INTEGER_VIEW[mode_result.dtype]
    differ = mode_result.contiguous().view(view) != torch_result.contiguous().view(view)
    return not bool((differ & ~(torch.isnan(mode_result) & torch.isnan(torch_result))).any())


# -- sin, cos, tan -----------------------------------------------------------------------------------
def _exact(values, name: str) -> np.ndarray:
    """The function of each float64 value (an FP32 or 16-bit number), to 400 bits, rounded to a double."""
    mpmath.mp.prec = 400
    function = getattr(mpmath, name)
    return np.array([float(function(mpmath.mpf(float(v)))) for v in values])


def _ulps(result32: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|result - exact| in units of the last place of the exact value in FP32 (subnormal ulp below 2**-126)."""
    result = result32.view(np.float32).astype(np.float64)
    exponent = np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-126)))
    return np.abs(result - exact) / 2.0 ** (exponent - 23)


def _fp32_sample() -> np.ndarray:
    rng = np.random.default_rng(11)
    patterns = [rng.integers(0, 0x7F800000, 1500, dtype=np.uint32),  # every magnitude, 1e-45 .. 3.4e38
                rng.integers(0x3E000000, 0x49000000, 600, dtype=np.uint32),  # 0.125 .. 5e5
                (np.float32(np.pi / 2) * rng.integers(1, 1 << 22, 300)).astype(np.float32).view(np.uint32),
                np.array([0x7F7FFFFF, 0x5922AA80, 0x6C4F4C70, 0x4B000000, 0x3F490FDB, 0x3FC90FDB, 0x40490FDB,
                          0x40C90FDB, 0x00000001, 0x00800000, 0x39800000, 0x3F800000,
                          0x51519BB8, 0x7F38278D, 0x45A4DC1C], np.uint32)]  # the sweep's worst sin, cos, tan
    bits = np.concatenate(patterns).astype(np.uint32)
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


@pytest.mark.parametrize("name, bound", [("sin", 0.75), ("cos", 0.75), ("tan", 0.85)])
def test_fp32_trig_within_its_bound_of_the_exact_value(name, bound):
    """docs/torch.md: measured max 0.718 (sin), 0.715 (cos), 0.849 (tan) ulp over 2.1 million inputs."""
    bits = _fp32_sample()
    result = getattr(fp32trig, name)(bits)
    errors = _ulps(result, _exact(bits.view(np.float32), name))
    assert errors.max() < bound, hex(int(bits[errors.argmax()]))
    correct = result == np.asarray(sf.fp32.from_float(_exact(bits.view(np.float32), name))).astype(np.uint32)
    assert correct.mean() > 0.98


def test_fp32_trig_odd_and_even():
    bits = _fp32_sample()
    negated = bits ^ np.uint32(0x80000000)
    assert np.array_equal(fp32trig.sin(negated), fp32trig.sin(bits) ^ np.uint32(0x80000000))
    assert np.array_equal(fp32trig.tan(negated), fp32trig.tan(bits) ^ np.uint32(0x80000000))
    assert np.array_equal(fp32trig.cos(negated), fp32trig.cos(bits))


def test_reduction_is_exact_near_multiples_of_half_pi():
    """The FP32 number nearest pi/2 and 8,248 * pi/2 ... : r = x - q pi/2 from the reduction against mpmath."""
    mpmath.mp.prec = 400
    values = np.float32([np.pi / 2, np.pi, 3 * np.pi / 2, 1e22, 3.4e38, 6381956970095103.0 * 2.0**797 / 2**797])
    quadrant, r_hi, r_lo = fp32trig.reduce_half_pi(values.view(np.uint32))
    for value, q, high, low in zip(values.astype(np.float64), quadrant, r_hi, r_lo):
        k = int(mpmath.nint(mpmath.mpf(float(value)) / (mpmath.pi / 2)))
        exact = mpmath.mpf(float(value)) - k * mpmath.pi / 2
        approximation = float(sf.fp32.to_float(high)) + float(sf.fp32.to_float(low))
        assert k % 4 == q
        assert abs(approximation - exact) <= abs(exact) * 2.0**-46


def _mode(function, *args, **kwargs):
    with sft.emulate():
        return function(*args, **kwargs)


def _patterns(dtype, step: int = 1):
    return torch.from_numpy(np.arange(0, 65536, step, dtype=np.uint16).view(np.int16)).view(dtype)


#: 16-bit inputs whose result, computed in FP32 and rounded again, is not the correctly rounded one
#: (measured over all 65,536 patterns; the negatives too): docs/torch.md.
NOT_CORRECTLY_ROUNDED = {(torch.float16, "sin"): {0x32B3, 0x5CB0}, (torch.float16, "cos"): {0x2B7C},
                         (torch.float16, "tan"): {0x2894, 0x55ED, 0x774A}}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_16_bit_trig_is_correctly_rounded_but_for_the_measured_inputs(dtype, name):
    x = _patterns(dtype, step=5)
    x = x[torch.isfinite(x) & (x != 0)]
    result = _mode(getattr(torch, name), x).view(torch.int16).numpy().view(np.uint16)
    exact = _exact(x.double().numpy(), name)
    if dtype == torch.float16:
        correct = exact.astype(np.float16).view(np.uint16)
    else:
        correct = np.asarray(sf.bf16.from_float(exact)).astype(np.uint16)
    patterns = x.view(torch.int16).numpy().view(np.uint16)
    wrong = {int(p) & 0x7FFF for p in patterns[result != correct]}
    assert wrong <= NOT_CORRECTLY_ROUNDED.get((dtype, name), set())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_16_bit_trig_matches_torch_cpu(dtype, name):
    """torch CPU computes in float and rounds once: every BF16 pattern agrees, FP16 but for sin(+-0x5CB0)."""
    x = _patterns(dtype, step=3)
    mode, native = _mode(getattr(torch, name), x), getattr(torch, name)(x)
    differ = (mode.view(torch.int16) != native.view(torch.int16)) & ~(torch.isnan(mode) & torch.isnan(native))
    assert {int(p) & 0xFFFF for p in x.view(torch.int16)[differ]} <= {0x5CB0, 0xDCB0}


def test_trig_specials_and_forms():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([0.0, -0.0, inf, -inf, nan, 3.4e38])
    sin, cos = _mode(torch.sin, x), _mode(torch.cos, x)
    assert sin.view(torch.int32)[:5].tolist() == [0, -(1 << 31), -0x400000, -0x400000, 0x7FC00000]  # -qNaN: x86
    assert cos[:2].tolist() == [1.0, 1.0] and torch.isnan(cos[2:5]).all()
    mpmath.mp.prec = 400
    assert sin[5].item() == float(np.float32(float(mpmath.sin(mpmath.mpf(float(np.float32(3.4e38)))))))
    half = torch.tensor([0.5, -2.0, 1000.0], dtype=torch.float16)
    with sft.emulate():
        inplace = half.clone().cos_()
        out = torch.empty(3, dtype=torch.float16)
        torch.tan(half, out=out)
        grad_input = half.clone().requires_grad_()
        torch.sin(grad_input).sum().backward()
    assert _identical(inplace, half.cos()) and _identical(out, half.tan())
    assert _identical(grad_input.grad, half.cos())


# -- cumsum, cumprod -----------------------------------------------------------------------------------
def _wide_range(shape, dtype, generator):
    x = torch.randn(shape, generator=generator) * torch.exp(torch.randn(shape, generator=generator) * 5)
    x[torch.rand(shape, generator=generator) < 0.05] = 0.0
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cumulative_bit_identical_to_torch(dtype):
    generator = torch.Generator().manual_seed(3)
    for shape in ((9,), (3, 7), (2, 5, 4)):
        for dim in range(-len(shape), len(shape)):
            x = _wide_range(shape, dtype, generator)
            factors = torch.exp(torch.randn(shape, generator=generator) * (15 if dtype == torch.float32 else 0.4))
            factors = factors.to(dtype)
            assert _identical(_mode(torch.cumsum, x, dim), torch.cumsum(x, dim)), (shape, dim)
            assert _identical(_mode(torch.cumprod, factors, dim), torch.cumprod(factors, dim)), (shape, dim)


def test_cumulative_accumulators_and_forms():
    # float32 accumulates in double: 1e8 + 1 - 1e8 is 1, not 0; half in float: 2048 + 1 + 1 is 2050
    big = torch.tensor([1e8, 1.0, -1e8])
    assert _mode(torch.cumsum, big, 0).tolist() == [1e8, 1e8, 1.0]
    assert _mode(torch.cumprod, torch.tensor([1e-30, 1e-30, 1e30, 1e30]), 0).tolist()[-1] == 1.0
    half = torch.tensor([2048, 1, 1, -2048], dtype=torch.float16)
    assert _mode(torch.cumsum, half, 0).tolist() == [2048, 2048, 2050, 2]
    x = torch.randn(4, 6).half()
    with sft.emulate():
        widened = torch.cumsum(x, 1, dtype=torch.float32)
        counted = torch.cumsum(torch.arange(5), 0, dtype=torch.bfloat16)
        inplace = x.clone().cumsum_(0)
        scalar = torch.cumprod(torch.tensor(3.0, dtype=torch.bfloat16), 0)
        gradient = x.clone().requires_grad_()
        (gradient.cumsum(1) * gradient.cumprod(0)).sum().backward()
    assert _identical(widened, torch.cumsum(x, 1, dtype=torch.float32))
    assert _identical(counted, torch.cumsum(torch.arange(5), 0, dtype=torch.bfloat16))
    assert _identical(inplace, x.cumsum(0)) and scalar.item() == 3.0 and gradient.grad.dtype == torch.float16


# -- scatter_add, scatter_reduce, histc -----------------------------------------------------------------
def _with_specials(shape, dtype, generator):
    x = _wide_range(shape, dtype, generator).float()
    mark = torch.rand(shape, generator=generator)
    x[mark < 0.02] = -0.0
    x[(mark > 0.02) & (mark < 0.03)] = float("inf")
    x[(mark > 0.03) & (mark < 0.04)] = -float("inf")
    x[(mark > 0.04) & (mark < 0.05)] = float("nan")
    return x.to(dtype)


SCATTER_LAYOUTS = [((5,), (12,), 0), ((4, 6), (3, 10), 1), ((3, 4, 5), (3, 7, 5), 1), ((3, 4, 5), (2, 3, 9), 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["add", "sum", "prod", "mean", "amax", "amin"])
def test_scatter_reductions_bit_identical_to_torch(dtype, reduce):
    generator = torch.Generator().manual_seed(5)
    for shape, index_shape, dim in SCATTER_LAYOUTS:
        for include_self in ((True,) if reduce == "add" else (True, False)):
            self = _with_specials(shape, dtype, generator)
            src = _with_specials(index_shape, dtype, generator)
            if reduce == "prod":
                src = (1 + 0.2 * torch.randn(index_shape, generator=generator)).to(dtype)
            index = torch.randint(0, shape[dim], index_shape, generator=generator)
            index = index[tuple(slice(None) if d == dim else slice(0, shape[d]) for d in range(len(shape)))]

            if reduce == "add":
                arguments, method = (dim, index, src), torch.Tensor.scatter_add
            else:
                arguments, method = (dim, index, src, reduce), torch.Tensor.scatter_reduce
            options = {} if reduce == "add" else {"include_self": include_self}
            assert _identical(_mode(method, self, *arguments, **options), method(self, *arguments, **options)), (
                shape, dim, include_self)


def test_scatter_orders_forms_and_errors():
    # each destination in FP32 from its value, sources in order along dim, one rounding
    eps = 2.0**-11
    ones = torch.ones(2, dtype=torch.float16)
    added = _mode(torch.Tensor.scatter_add, ones, 0, torch.tensor([0, 0]), torch.tensor([eps, eps]).half())
    assert added.tolist() == [1 + 2 * eps, 1.0]
    ordered = _mode(torch.Tensor.scatter_add, torch.zeros(1), 0, torch.tensor([0, 0, 0]),
                    torch.tensor([2.0**-24, 2.0**-24, 1.0]))
    assert ordered.item() == 1 + 2.0**-23
    # the expanded-index layout of torch's fast path (dim 0, index of stride (1, 0), 32 columns)
    index = torch.tensor([0, 2, 0, 0, 1])[:, None].expand(5, 32)
    src = torch.randn(5, 32).bfloat16()
    target = torch.randn(3, 32).bfloat16()
    with sft.emulate():
        inplace = target.clone().scatter_add_(0, index, src)
        mean = target.scatter_reduce(0, index, src, "mean", include_self=False)
    assert _identical(inplace, target.clone().scatter_add_(0, index, src))
    assert _identical(mean, target.scatter_reduce(0, index, src, "mean", include_self=False))
    with pytest.raises(IndexError, match="outside"):
        _mode(torch.Tensor.scatter_add, torch.zeros(3), 0, torch.tensor([3]), torch.ones(1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_histc_bit_identical_to_torch(dtype):
    generator = torch.Generator().manual_seed(9)
    for bins, low, high in ((1, 0, 0), (3, -2, 2), (7, -1, 3.3), (10, 0.1, 0.7), (100, -5, 5), (4, 0, 0)):
        x = (torch.randn(150, generator=generator) * 3).to(dtype)
        x[:20] = torch.round(x[:20])  # on bin edges
        if low != high:
            x[::11] = float("nan")  # skipped
        assert _identical(_mode(torch.histc, x, bins=bins, min=low, max=high),
                          torch.histc(x, bins=bins, min=low, max=high)), (bins, low, high)
    constant = torch.full((5,), 3.0, dtype=dtype)
    assert _mode(torch.histc, constant, bins=4).tolist() == torch.histc(constant, bins=4).tolist() == [0, 0, 5, 0]
    with pytest.raises(RuntimeError, match="not finite"):
        _mode(torch.histc, torch.tensor([1.0, float("nan")], dtype=dtype), bins=3)


# -- _grouped_mm ---------------------------------------------------------------------------------------
def _dyadic(shape, dtype, generator):
    """Small integers times small powers of two: every product and sum is exact in FP32, in any order."""
    integers = torch.randint(-8, 9, shape, generator=generator)
    return (integers * 2.0 ** torch.randint(-3, 4, shape, generator=generator)).to(dtype)


def _ends(*values):
    return torch.tensor(values, dtype=torch.int32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_bit_identical_to_torch_and_to_mm_per_group(dtype):
    generator = torch.Generator().manual_seed(13)
    grouped = torch.ops.aten._grouped_mm.default
    cases = [((24, 16), (3, 16, 8), _ends(5, 5, 24)), ((8, 16), (3, 16, 8), _ends(0, 3, 8)),
             ((3, 8, 16), (16, 32), _ends(8, 8, 32)), ((8, 32), (32, 16), _ends(16, 16, 32)),
             ((3, 8, 16), (3, 16, 8), None)]
    for shape_a, shape_b, ends in cases:
        a, b = _dyadic(shape_a, dtype, generator), _dyadic(shape_b, dtype, generator)
        result = _mode(grouped, a, b, ends)
        assert _identical(result, grouped(a, b, ends)), (shape_a, shape_b)
        starts = [0] + (ends.tolist()[:-1] if ends is not None else [])
        with sft.emulate():
            if ends is None:
                expected = torch.bmm(a, b)
            elif len(shape_b) == 3:
                expected = torch.cat([a[s:e] @ b[g] for g, (s, e) in enumerate(zip(starts, ends.tolist()))])
            elif len(shape_a) == 3:
                expected = torch.cat([a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends.tolist()))], 1)
            else:
                expected = torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends.tolist())])
        assert _identical(result, expected)


def test_grouped_mm_rounding_rows_past_the_ends_and_errors():
    a, b = torch.randn(12, 16).bfloat16(), torch.randn(2, 16, 8).bfloat16()
    with sft.emulate():
        result = torch.nn.functional.grouped_mm(a, b, offs=_ends(4, 10))
        expected = torch.cat([a[:4] @ b[0], a[4:10] @ b[1]])
        gradient_a, gradient_b = a.clone().requires_grad_(), b.clone().requires_grad_()
        torch.nn.functional.grouped_mm(gradient_a, gradient_b, offs=_ends(4, 12)).float().sum().backward()
    assert _identical(result[:10], expected) and result[10:].eq(0).all()
    assert gradient_a.grad.shape == a.shape and gradient_b.grad.shape == b.shape
    with pytest.raises(ValueError, match="offs"):
        _mode(torch.ops.aten._grouped_mm.default, a, b)
    with pytest.raises(ValueError, match="offs"):
        _mode(torch.ops.aten._grouped_mm.default, a, b, _ends(8, 4))
