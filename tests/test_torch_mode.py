"""softfloat16.torch: the dispatch mode against native torch CPU (elementwise ops, casts), against
explicit FP32 k-loops in torch (matmuls, sums), and on a small model (strict, deterministic)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softfloat16 as sf  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch.tensors import bits, from_bits  # noqa: E402

FORMATS = {torch.float16: sf.fp16, torch.bfloat16: sf.bf16, torch.float32: sf.fp32}
FORMATS_BY_NAME = {fmt.name: dtype for dtype, fmt in FORMATS.items()}
HALVES = [torch.float16, torch.bfloat16]
N = 1 << 16


def special_patterns(fmt) -> np.ndarray:
    """Zeros, subnormals, extremes, infinities and NaNs (quiet, signaling, both signs) of fmt."""
    top = fmt.sign_mask
    values = [0, 1, 2, fmt.min_normal - 1, fmt.min_normal, fmt.one, fmt.max_finite, fmt.inf, fmt.inf | 1,
              fmt.default_nan, fmt.default_nan | 5, fmt.magnitude_mask]
    return np.array(values + [v | top for v in values], dtype=fmt.dtype)


def random_patterns(dtype, n=N, seed=0) -> np.ndarray:
    """Uniform bit patterns, a fifth of them replaced by special values, some small numbers."""
    fmt = FORMATS[dtype]
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 1 << fmt.width, n, dtype=np.uint64).astype(fmt.dtype)
    special = special_patterns(fmt)
    pick = rng.integers(0, 5, n) == 0
    patterns[pick] = special[rng.integers(0, len(special), int(pick.sum()))]
    # Values near 1 too, so that sums and products are not all overflow or underflow.
    near = rng.integers(0, 4, n) == 0
    patterns[near] = (fmt.one + rng.integers(-3 << (fmt.fraction_bits), 3 << fmt.fraction_bits, int(near.sum()))
                      ).astype(fmt.dtype) ^ (rng.integers(0, 2, int(near.sum())) * fmt.sign_mask).astype(fmt.dtype)
    return patterns


def tensor(patterns, dtype):
    return from_bits(patterns, dtype)


def assert_bits_equal(got: torch.Tensor, want: torch.Tensor, what: str, nan_class_only=None, zero_sign_free=None):
    """Bits equal, except: where ``nan_class_only`` is set (or everywhere for bfloat16, whose NaN
    results torch canonicalises) a NaN matches any NaN; where ``zero_sign_free`` is set, +0 and -0
    match."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    if got.dtype == torch.bool:
        assert torch.equal(got, want), what
        return
    fmt = FORMATS[got.dtype]
    g, w = bits(got).ravel(), bits(want).ravel()
    g_nan, w_nan = fmt.is_nan(g), fmt.is_nan(w)
    assert np.array_equal(g_nan, w_nan), f"{what}: NaN class differs at {np.flatnonzero(g_nan != w_nan)[:5]}"
    loose = np.zeros(g.shape, bool) if nan_class_only is None else np.broadcast_to(nan_class_only, g.shape).ravel()
    if got.dtype == torch.bfloat16:
        loose = np.ones(g.shape, bool)
    differ = (g != w) & ~(loose & w_nan)
    if zero_sign_free is not None:
        differ &= ~(np.broadcast_to(zero_sign_free, g.shape).ravel() & fmt.is_zero(g) & fmt.is_zero(w))
    if differ.any():
        i = np.flatnonzero(differ)[:5]
        pytest.fail(f"{what}: {int(differ.sum())} of {g.size} differ, first at {i}: got {[hex(x) for x in g[i]]}, "
                    f"torch {[hex(x) for x in w[i]]}")


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# -- elementwise ops against native torch CPU ------------------------------------------------------
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "add alpha": lambda a, b: torch.add(a, b, alpha=0.3), "sub alpha": lambda a, b: torch.sub(a, b, alpha=-2.7),
    "maximum": torch.maximum, "minimum": torch.minimum, "clamp(a, min=b)": lambda a, b: torch.clamp(a, min=b),
    "clamp(a, max=b)": lambda a, b: torch.clamp(a, max=b),
}
COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "relu": torch.relu, "clamp": lambda x: torch.clamp(x, -0.7, 3.1), "clamp_min": lambda x: x.clamp(min=0.2),
    "clamp(min=0)": lambda x: x.clamp(min=0), "clamp(max=-0.0)": lambda x: x.clamp(max=-0.0),
}
SCALAR = {
    "x + 0.1": lambda x: x + 0.1, "x - 1/3": lambda x: x - 1 / 3, "0.1 - x": lambda x: 0.1 - x,
    "x * 0.1": lambda x: x * 0.1, "x / 0.1": lambda x: x / 0.1, "3 * x": lambda x: 3 * x, "x / 7": lambda x: x / 7,
    "1 / x": lambda x: 1 / x, "x > 0.1": lambda x: x > 0.1, "x == 0.1": lambda x: x == 0.1,
    "x + tensor(0.1)": lambda x: x + torch.tensor(0.1), "x * tensor(0.1)": lambda x: x * torch.tensor(0.1),
    "x.add(2.5, alpha=0.3)": lambda x: x.add(2.5, alpha=0.3),
    "where(x > 0, x, 0.1)": lambda x: torch.where(x > 0, x, 0.1),
    "x.masked_fill(x < 0, 0.1)": lambda x: x.masked_fill(x < 0, 0.1),
}


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops_match_torch_cpu(name, dtype):
    torch.set_num_threads(1)
    a_bits, b_bits = random_patterns(dtype, seed=1), random_patterns(dtype, seed=2)
    a, b = tensor(a_bits, dtype), tensor(b_bits, dtype)
    want = BINARY[name](a, b)
    with sft.emulate() as mode:
        got = BINARY[name](a, b)
    fmt = FORMATS[dtype]
    both_nan = fmt.is_nan(a_bits) & fmt.is_nan(b_bits)
    selection = name in ("maximum", "minimum") or name.startswith("clamp")
    # torch's NaN when both operands are NaN depends on code generation (docs/torch.md); its maximum /
    # minimum NaN is 0xFFFF... in the vectorised loop, and its choice between -0 and +0 differs
    # between the vectorised loop (b) and the tail (a); clamp with tensor bounds uses the same loops.
    loose = (fmt.is_nan(a_bits) | fmt.is_nan(b_bits)) if selection else both_nan
    assert_bits_equal(got, want, f"{dtype} {name}", nan_class_only=loose,
                      zero_sign_free=(fmt.is_zero(a_bits) & fmt.is_zero(b_bits)) if selection else None)
    assert not mode.fallbacks


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=lambda f: f.name)
@pytest.mark.parametrize("rounding", ["rne", "rna", "rtz", "rup", "rdn", "rod"])
def test_one_rounding_in_the_format_equals_the_fp32_step_rounded_again(rounding, fmt):
    """The mode's shortcut (elementwise._direct): for + - * / sqrt of FP16/BF16 operands, the FP32
    result rounded into the format equals the correctly rounded result, in every rounding mode."""
    a, b = random_patterns(FORMATS_BY_NAME[fmt.name], seed=20), random_patterns(FORMATS_BY_NAME[fmt.name], seed=21)
    a[::3] = (a[::3] & ~np.array(fmt.exponent_mask, a.dtype)) | (b[::3] & np.array(fmt.exponent_mask, a.dtype))
    options = {"rounding": rounding, "nan": "x86"}
    widen = lambda x: sf.convert(x, fmt, sf.fp32, nan="x86")  # noqa: E731
    for op in ("add", "sub", "mul", "div"):
        two_steps = sf.convert(getattr(sf.fp32, op)(widen(a), widen(b), **options), sf.fp32, fmt, **options)
        assert np.array_equal(two_steps, getattr(fmt, op)(a, b, **options)), op
    two_steps = sf.convert(sf.fp32.sqrt(widen(a), **options), sf.fp32, fmt, **options)
    assert np.array_equal(two_steps, fmt.sqrt(a, **options))


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
@pytest.mark.parametrize("name", list(COMPARE))
def test_comparisons_match_torch_cpu(name, dtype):
    a_bits, b_bits = random_patterns(dtype, seed=3), random_patterns(dtype, seed=4)
    b_bits[::3] = a_bits[::3]  # equal pairs
    a, b = tensor(a_bits, dtype), tensor(b_bits, dtype)
    with sft.emulate():
        got = COMPARE[name](a, b)
    assert torch.equal(got, COMPARE[name](a, b)), name


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ops_match_torch_cpu(name, dtype):
    torch.set_num_threads(1)
    x_bits = random_patterns(dtype, seed=5)
    if dtype != torch.float32:
        x_bits[:1 << 16] = np.arange(1 << 16, dtype=np.uint16)[: min(N, 1 << 16)]  # every FP16 / BF16 value
    x = tensor(x_bits, dtype)
    want = UNARY[name](x)
    with sft.emulate():
        got = UNARY[name](x)
    fmt = FORMATS[dtype]
    nan_input = fmt.is_nan(x_bits)
    if dtype == torch.float32 and name in ("sqrt", "rsqrt"):
        # torch CPU float32 sqrt is not correctly rounded (docs/torch.md); the mode's is.
        exact = tensor(sf.fp32.sqrt(x_bits, nan="x86"), dtype)
        want = exact if name == "sqrt" else tensor(sf.fp32.div(np.uint32(0x3F800000), bits(exact), nan="x86"), dtype)
    # relu / clamp of a signaling NaN: torch quiets it in the vectorised loop only.
    assert_bits_equal(got, want, f"{dtype} {name}", nan_class_only=nan_input & fmt.is_signaling(x_bits))


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
@pytest.mark.parametrize("name", list(SCALAR))
def test_scalar_operands_follow_torch_promotion(name, dtype):
    """A Python scalar: rounded to the tensor's dtype for + - and comparisons, kept in FP32 for *
    and / (torch CPU's opmath): both reproduced."""
    torch.set_num_threads(1)
    x_bits = random_patterns(dtype, seed=6)
    x = tensor(x_bits, dtype)
    want = SCALAR[name](x)
    with sft.emulate() as mode:
        got = SCALAR[name](x)
    assert not mode.fallbacks
    assert_bits_equal(got, want, f"{dtype} {name}")


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_mixed_dtypes_compute_in_the_promoted_dtype(dtype):
    torch.set_num_threads(1)
    a = tensor(random_patterns(dtype, seed=7), dtype)
    b = tensor(random_patterns(torch.float32, seed=8), torch.float32)
    for op in (torch.add, torch.mul, torch.div):
        want = op(a, b)
        with sft.emulate():
            got = op(a, b)
        assert got.dtype == torch.float32
        assert_bits_equal(got, want, f"{dtype} {op.__name__} float32", nan_class_only=True)
    # In place into the narrower dtype: computed in FP32, rounded once into self.
    want = a.clone().add_(b)
    with sft.emulate():
        got = a.clone().add_(b)
    assert_bits_equal(got, want, f"{dtype}.add_(float32)", nan_class_only=True)


# -- casts and fills ---------------------------------------------------------------------------------
CASTS = [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
         torch.float8_e5m2fnuz]


@pytest.mark.parametrize("dst", CASTS, ids=str)
def test_casts_from_float32_match_torch(dst):
    """float32 -> FP16/BF16/FP8 as torch converts: E4M3FN saturates to 448, E5M2 overflows to inf,
    the FNUZ formats to their NaN."""
    x = tensor(random_patterns(torch.float32, seed=9), torch.float32)
    x[:4] = torch.tensor([480.0, -1e6, 65520.0, 3e38])
    with sft.emulate() as mode:
        got = x.to(dst)
    want = x.to(dst)
    assert not mode.fallbacks
    fmt = sft.DTYPE_FORMATS[dst]
    g_bits, w_bits = bits(got), bits(want)
    # NaN payloads: torch writes a canonical NaN for bfloat16 and E5M2, the profile keeps the payload.
    nan = fmt.is_nan(w_bits)
    assert np.array_equal(fmt.is_nan(g_bits), nan), dst
    assert np.array_equal(g_bits[~nan], w_bits[~nan]), dst


@pytest.mark.parametrize("src", CASTS, ids=str)
def test_widening_casts_are_exact(src):
    fmt = sft.DTYPE_FORMATS[src]
    every = from_bits(np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.dtype), src)
    with sft.emulate():
        got = every.float()
    assert_bits_equal(got, every.float(), f"{src} -> float32", nan_class_only=True)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_float64_and_integer_sources_round_through_float32_like_torch(dtype):
    rng = np.random.default_rng(10)
    doubles = torch.from_numpy(rng.standard_normal(N) * 10.0 ** rng.integers(-8, 6, N))
    fmt = FORMATS[dtype]
    # 1 + half an ulp + a little: a tie after rounding to float32, so float32 decides the direction.
    half_ulp = 2.0 ** -(fmt.fraction_bits + 1)
    doubles[:2] = torch.tensor([1 + half_ulp + 2.0 ** -40, -(1 + half_ulp)])
    integers = torch.from_numpy(rng.integers(-(1 << 30), 1 << 30, N))
    for source in (doubles, integers):
        with sft.emulate():
            got = source.to(dtype)
        assert_bits_equal(got, source.to(dtype), f"{source.dtype} -> {dtype}")


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
def test_fills_round_their_value_like_torch(dtype):
    fmt = FORMATS[dtype]
    values = [0.1, -1 / 3, 1 + 2.0 ** -(fmt.fraction_bits + 1) + 2.0 ** -40, 65519.0, 65520.0, 1e-8, 3, True,
              float("inf"), -3.4e38, float("nan"), 1e39]
    base = torch.zeros(4, dtype=dtype)
    for value in values:
        cases = {"full": lambda v=value: torch.full((3,), v, dtype=dtype),
                 "full_like": lambda v=value: torch.full_like(base, v),
                 "new_full": lambda v=value: base.new_full((2,), v),
                 "fill_": lambda v=value: base.clone().fill_(v),
                 "masked_fill": lambda v=value: base.masked_fill(torch.tensor([True, False, True, False]), v),
                 "pad": lambda v=value: torch.nn.functional.pad(base, (1, 1), value=v)}
        for name, make in cases.items():
            try:
                want = make()
            except RuntimeError as refusal:  # torch refuses values beyond the dtype in some fills
                with pytest.raises(RuntimeError, match=str(refusal)), sft.emulate():
                    make()
                continue
            with sft.emulate() as mode:
                got = make()
            assert not mode.fallbacks, name
            assert_bits_equal(got, want, f"{dtype} {name}({value})")


def test_fills_beyond_float32_are_refused_like_torch():
    for make in (lambda: torch.full((3,), 1e39, dtype=torch.float16), lambda: torch.zeros(3).fill_(-1e39)):
        with pytest.raises(RuntimeError, match="without overflow"):
            make()
        with pytest.raises(RuntimeError, match="without overflow"), sft.emulate():
            make()


def test_fill_dtype_follows_the_python_type():
    with sft.emulate():
        assert torch.full((2,), 3).dtype == torch.int64
        assert torch.full((2,), 0.1).dtype == torch.get_default_dtype()
        assert torch.full((2,), True).dtype == torch.bool


def test_rounding_modes_and_stochastic_rounding():
    x = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float16)
    tiny = torch.tensor([2.0 ** -12, 2.0 ** -11 * 3, 2.0 ** -12], dtype=torch.float16)
    # Exact sums 1 + 2**-12, 1 + 1.5 * 2**-10 (a tie), -1 + 2**-12 (a tie: the ulp below 1 is 2**-11).
    expected = {"rne": [1.0, 1.001953125, -1.0], "rtz": [1.0, 1.0009765625, -0.99951171875],
                "rup": [1.0009765625, 1.001953125, -0.99951171875], "rdn": [1.0, 1.0009765625, -1.0],
                "rna": [1.0, 1.001953125, -1.0]}
    for rounding, want in expected.items():
        with sft.emulate(rounding=rounding):
            got = x + tiny
        assert got.tolist() == want, rounding
    big = torch.full((4096,), 1.0, dtype=torch.bfloat16)
    step = torch.full((4096,), 2.0 ** -9, dtype=torch.bfloat16)  # a quarter of an ulp of 1
    runs = []
    for seed in (1, 1, 2):
        with sft.emulate(rounding="sr", seed=seed):
            runs.append(big + step)
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])
    up = (runs[0] > 1).float().mean().item()
    assert set(runs[0].tolist()) == {1.0, 1.0078125} and 0.2 < up < 0.3
    with pytest.raises(ValueError, match="seed"):
        sft.emulate(rounding="sr")


def test_ftz_flushes_subnormal_results():
    x = torch.tensor([2.0 ** -14, 2.0 ** -14], dtype=torch.float16)
    with sft.emulate(ftz=True):
        got = x * torch.tensor([0.5, 2.0], dtype=torch.float16)
    assert got.tolist() == [0.0, 2.0 ** -13]


# -- matmul family and reductions against explicit FP32 loops in torch ------------------------------
def kloop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """FP32 ``a @ b`` of 2-D FP16/BF16 tensors: products exact in FP32, added one k at a time from +0."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
    for k in range(a.shape[1]):
        acc = acc + a[:, k:k + 1].float() * b[k:k + 1, :].float()
    return acc


def kloop_sum(x: torch.Tensor) -> torch.Tensor:
    """FP32 sums of each row of a 2-D tensor, one element at a time from +0."""
    acc = torch.zeros(x.shape[0], dtype=torch.float32)
    for k in range(x.shape[1]):
        acc = acc + x[:, k].float()
    return acc


def gaussian(*shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * 2).to(dtype)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_matmul_family_equals_an_fp32_k_loop(dtype):
    a, b = gaussian(5, 37, dtype=dtype, seed=1), gaussian(37, 6, dtype=dtype, seed=2)
    bias = gaussian(6, dtype=dtype, seed=3)
    batch_a, batch_b = gaussian(3, 5, 37, dtype=dtype, seed=4), gaussian(3, 37, 6, dtype=dtype, seed=5)
    batch_c = gaussian(3, 5, 6, dtype=dtype, seed=6)
    weight = gaussian(6, 37, dtype=dtype, seed=7)
    x3 = gaussian(2, 4, 37, dtype=dtype, seed=8)
    with sft.emulate() as mode:
        got = {
            "mm": a @ b, "addmm": torch.addmm(bias, a, b),
            "addmm beta alpha": torch.addmm(bias, a, b, beta=0.5, alpha=3),
            "bmm": torch.bmm(batch_a, batch_b), "baddbmm": torch.baddbmm(batch_c, batch_a, batch_b),
            "linear": torch.nn.functional.linear(a, weight, bias), "linear 3d": torch.nn.functional.linear(x3, weight),
            "matmul 3d @ 2d": x3 @ b, "mv": a @ b[:, 0], "dot": a[0] @ b[:, 0],
        }
    assert not mode.fallbacks
    acc = kloop(a, b)
    want = {
        "mm": acc.to(dtype), "addmm": (acc + bias.float()).to(dtype),
        "addmm beta alpha": (acc * 3 + bias.float() * 0.5).to(dtype),
        "bmm": torch.stack([kloop(batch_a[i], batch_b[i]) for i in range(3)]).to(dtype),
        "baddbmm": torch.stack([kloop(batch_a[i], batch_b[i]) + batch_c[i].float() for i in range(3)]).to(dtype),
        "linear": (kloop(a, weight.t()) + bias.float()).to(dtype),
        "linear 3d": kloop(x3.reshape(8, 37), weight.t()).reshape(2, 4, 6).to(dtype),
        "matmul 3d @ 2d": kloop(x3.reshape(8, 37), b).reshape(2, 4, 6).to(dtype),
        "mv": acc[:, 0].to(dtype), "dot": acc[0, 0].to(dtype),
    }
    for name in want:
        assert_bits_equal(got[name], want[name], f"{dtype} {name}")


def test_float32_matmul_adds_exact_products():
    """FP32 inputs: each exact product is added with one rounding (an fma chain). On inputs of 12
    significant bits (times 8) the products are exact in FP32, so the k-loop of plain adds agrees."""
    a = gaussian(4, 50, dtype=torch.bfloat16, seed=9).float() * (1 + 2.0 ** -4)  # 12 bits: a * b has 20
    b = gaussian(50, 3, dtype=torch.bfloat16, seed=10).float()
    with sft.emulate():
        got = a @ b
    acc = torch.zeros(4, 3)
    for k in range(50):
        acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
    assert torch.equal(got.view(torch.int32), acc.view(torch.int32))


@pytest.mark.parametrize("order", ["pairwise", "tensorcore"])
@pytest.mark.parametrize("accumulate", ["fp32", "fp16"])
def test_matmul_order_and_accumulation_come_from_the_mode(order, accumulate):
    a, b = gaussian(3, 40, dtype=torch.float16, seed=11), gaussian(40, 5, dtype=torch.float16, seed=12)
    core = {"tensor_core": "h100"} if order == "tensorcore" else {}  # linalg.matmul's default unit
    with sft.emulate(order=order, accumulate=accumulate, **core):
        got = a @ b
    want = sf.linalg.matmul(bits(a), bits(b), sf.fp16, accumulate=accumulate, order=order)
    assert np.array_equal(bits(got), want)


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
def test_sums_and_means_equal_a_sequential_fp32_loop(dtype):
    x = gaussian(6, 9, 33, dtype=dtype, seed=13)
    with sft.emulate() as mode:
        got = {"sum": x.sum(), "sum dim": x.sum(2), "sum dims keepdim": x.sum((0, 2), keepdim=True),
               "sum dtype": x.sum(1, dtype=torch.float32), "mean": x.mean(), "mean dim": x.mean(-1),
               "mean dims": x.mean((1, 2), keepdim=True)}
    assert not mode.fallbacks
    rows_last = x.reshape(54, 33)
    want = {
        "sum": kloop_sum(x.reshape(1, -1))[0].to(dtype),
        "sum dim": kloop_sum(rows_last).reshape(6, 9).to(dtype),
        "sum dims keepdim": kloop_sum(x.permute(1, 0, 2).reshape(9, -1)).reshape(1, 9, 1).to(dtype),
        "sum dtype": kloop_sum(x.permute(0, 2, 1).reshape(6 * 33, 9)).reshape(6, 33),
        "mean": (kloop_sum(x.reshape(1, -1))[0] / x.numel()).to(dtype),
        "mean dim": (kloop_sum(rows_last) / 33).reshape(6, 9).to(dtype),
        "mean dims": (kloop_sum(x.reshape(6, -1)) / (9 * 33)).reshape(6, 1, 1).to(dtype),
    }
    for name in want:
        assert_bits_equal(got[name], want[name], f"{dtype} {name}")


@pytest.mark.parametrize("dtype", HALVES + [torch.float32], ids=str)
def test_amax_amin_match_torch(dtype):
    x_bits = random_patterns(dtype, n=40 * 64, seed=14).reshape(40, 64)
    x_bits[:20] &= ~np.array(FORMATS[dtype].sign_mask, dtype=x_bits.dtype)  # some rows without negatives
    fmt = FORMATS[dtype]
    x_bits[fmt.is_nan(x_bits) & (np.arange(40)[:, None] % 2 == 0)] = fmt.one  # even rows: no NaN
    x = tensor(x_bits, dtype)
    ops = {"amax": lambda t: t.amax(1), "amin": lambda t: t.amin(1), "amax all": lambda t: t.amax(),
           "max": lambda t: t.max(), "min": lambda t: t.min(), "amax 0": lambda t: t.amax(0, keepdim=True)}
    for name, op in ops.items():
        with sft.emulate():
            got = op(x)
        assert_bits_equal(got, op(x), f"{dtype} {name}", nan_class_only=True)


def test_mse_loss_and_its_gradient_match_torch_elementwise():
    for dtype in HALVES:
        x = gaussian(7, 5, dtype=dtype, seed=15).requires_grad_()
        y = gaussian(7, 5, dtype=dtype, seed=16)
        want_none = torch.nn.functional.mse_loss(x, y, reduction="none")
        torch.nn.functional.mse_loss(x, y).backward()
        want_grad, x.grad = x.grad, None
        with sft.emulate() as mode:
            got_none = torch.nn.functional.mse_loss(x, y, reduction="none")
            loss = torch.nn.functional.mse_loss(x, y)
            loss.backward()
        assert not mode.fallbacks
        assert_bits_equal(got_none, want_none, f"{dtype} mse none")
        assert_bits_equal(x.grad, want_grad, f"{dtype} mse gradient")
        squares = ((x.detach().float() - y.float()).to(dtype).float() ** 2).to(dtype)
        assert_bits_equal(loss.detach(), (kloop_sum(squares.reshape(1, -1))[0] / 35).to(dtype), f"{dtype} mse mean")


# -- the mode itself --------------------------------------------------------------------------------
def test_strict_mode_names_the_missing_op():
    x = torch.ones(3, dtype=torch.float16)
    with pytest.raises(sft.NotEmulatedError, match=r"aten\.cosh\.default"), sft.emulate():
        torch.cosh(x)
    with pytest.raises(sft.NotEmulatedError, match=r"aten\.scatter\.reduce .*scatter with reduce"), sft.emulate():
        x.scatter(0, torch.tensor([0, 1]), torch.ones(2, dtype=torch.float16), reduce="add")


def test_non_strict_mode_falls_back_and_counts():
    x = torch.full((3,), 0.5, dtype=torch.bfloat16)
    with sft.emulate(strict=False) as mode:
        y = torch.cosh(x) + torch.cosh(x)
        z = torch.lgamma(x)
    assert torch.equal(y, torch.cosh(x) + torch.cosh(x)) and torch.equal(z, torch.lgamma(x))
    assert dict(mode.fallbacks) == {"aten.cosh.default": 2, "aten.lgamma.default": 1}
    assert "aten.cosh.default: 2" in mode.report()


def test_integer_float64_and_bool_ops_run_natively_uncounted():
    with sft.emulate() as mode:
        i = torch.arange(6).reshape(2, 3) * 3 + 1
        d = torch.linspace(0, 1, 5, dtype=torch.float64).exp().sum()
        b = (i > 3).logical_and(i < 10)
    assert i.tolist() == [[1, 4, 7], [10, 13, 16]] and abs(d.item() - 8.7) < 0.1 and b.sum().item() == 2
    assert not mode.fallbacks


def test_a_cuda_tensor_is_a_clear_error():
    # Without a GPU (a CPU build of torch fails before dispatch): the mode's own check, called directly.
    mode = sft.emulate()
    with pytest.raises(sft.EmulationError, match="computes on the CPU; aten.zeros.default got a cuda tensor"):
        mode.__torch_dispatch__(torch.ops.aten.zeros.default, (), ([3],), {"device": torch.device("cuda")})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_tensor_is_a_clear_error_on_a_gpu():
    x = torch.ones(3, dtype=torch.float16, device="cuda")
    with pytest.raises(sft.EmulationError, match="got a cuda tensor"), sft.emulate():
        x + 1


def test_meta_tensors_pass_through():
    with sft.emulate():
        y = torch.ones(4, 3, dtype=torch.float16, device="meta") @ torch.ones(3, 2, dtype=torch.float16, device="meta")
    assert y.shape == (4, 2) and y.device.type == "meta"


def test_import_rules():
    """``import softfloat16`` never imports torch; ``softfloat16.torch`` without torch says what to install."""
    code = ("import sys, softfloat16, softfloat16.linalg; assert 'torch' not in sys.modules\n"
            "sys.modules['torch'] = None\n"
            "try:\n    import softfloat16.torch\nexcept ImportError as error:\n    print(error)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ('softfloat16.torch needs PyTorch; install it with: pip install -e ".[crosscheck]" '
                   "(in the softfloat16 checkout)")


def test_options_are_checked():
    for bad, match in [({"rounding": "up-ish"}, "rounding"), ({"order": "random"}, "order"), ({"nan": "vax"}, "nan"),
                       ({"accumulate": "e4m3"}, "accumulate"), ({"ftz": 1}, "ftz"), ({"strict": "yes"}, "strict"),
                       ({"tensor_core": "v200"}, "tensor_core")]:
        with pytest.raises((ValueError, TypeError), match=match):
            sft.emulate(**bad)


# -- a model, forward and backward --------------------------------------------------------------------
def train_mlp(dtype, threads, steps=2, loss_name="mse"):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dtype)
    x, y = torch.randn(8, 6).to(dtype), torch.randn(8, 3).to(dtype)
    labels = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    losses = []
    with sft.emulate(strict=True) as mode:
        for _ in range(steps):
            optimizer.zero_grad()
            if loss_name == "mse":
                loss = torch.nn.functional.mse_loss(model(x), y)
            else:
                loss = torch.nn.CrossEntropyLoss()(model(x), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
    assert not mode.fallbacks
    return losses, [p.detach().clone() for p in model.parameters()], [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("loss_name", ["mse", "cross_entropy"])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_mlp_trains_under_strict_mode_deterministically(dtype, loss_name):
    first, second, two_threads = (train_mlp(dtype, 1, loss_name=loss_name), train_mlp(dtype, 1, loss_name=loss_name),
                                  train_mlp(dtype, 2, loss_name=loss_name))
    for run in (second, two_threads):
        for got, want in zip((t for group in run for t in group), (t for group in first for t in group)):
            assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    # And close to the same model in native torch.
    torch.manual_seed(0)
    native = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dtype)
    x, y = torch.randn(8, 6).to(dtype), torch.randn(8, 3).to(dtype)
    labels = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1])
    loss = (torch.nn.functional.mse_loss(native(x), y) if loss_name == "mse" else
            torch.nn.functional.cross_entropy(native(x), labels))
    assert abs(loss.item() - first[0][0].item()) <= 0.02 * abs(loss.item())


# -- exp, log, softmax, cross-entropy ------------------------------------------------------------------
def exp32_reference(x32: torch.Tensor) -> torch.Tensor:
    """sim's emulated FP32 exp (the definition the mode follows), on float32 tensors."""
    from sim import fp32math

    patterns = fp32math.exp(x32.contiguous().view(torch.int32).numpy().view(np.uint32))
    return torch.from_numpy(patterns.view(np.int32)).view(torch.float32).reshape(x32.shape)


def test_exp_and_log_are_the_shared_fp32_algorithms():
    """Under the mode, float32 exp and log are softfloat16.fp32math's (the simulator's) bit for bit."""
    from sim import fp32math

    rng = np.random.default_rng(17)
    x = np.concatenate([rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32),
                        sf.fp32.from_float(rng.standard_normal(1 << 16) * 20)])
    tensor = torch.from_numpy(x.view(np.int32)).view(torch.float32)
    with sft.emulate():
        got_exp, got_log = torch.exp(tensor), torch.log(tensor)
    for got, expected in ((got_exp, fp32math.exp(x)), (got_log, fp32math.log(x))):
        assert np.array_equal(got.view(torch.int32).numpy().view(np.uint32), expected)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_softmax_and_log_softmax_follow_their_fp32_definition(dtype):
    x = gaussian(6, 11, dtype=dtype, seed=18) * 3
    with sft.emulate() as mode:
        soft, log_soft = torch.softmax(x, dim=1), torch.log_softmax(x, dim=0)
        soft_float = torch.softmax(x, dim=1, dtype=torch.float32)
    assert not mode.fallbacks
    x32 = x.float()
    shifted = x32 - x32.amax(1, keepdim=True)
    exps = exp32_reference(shifted)
    want = exps / kloop_sum(exps)[:, None]
    assert_bits_equal(soft, want.to(dtype), f"{dtype} softmax")
    assert_bits_equal(soft_float, (exps / kloop_sum(exps)[:, None]), f"{dtype} softmax to float32")
    assert torch.allclose(soft.float(), torch.softmax(x.float(), 1), rtol=2.0 ** -7, atol=1e-6)
    shifted0 = (x32 - x32.amax(0, keepdim=True)).t()
    from sim import fp32math
    totals = kloop_sum(exp32_reference(shifted0))
    logs = torch.from_numpy(fp32math.log(totals.numpy().view(np.uint32)).view(np.int32)).view(torch.float32)
    assert_bits_equal(log_soft, (shifted0 - logs[:, None]).t().to(dtype), f"{dtype} log_softmax")


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_cross_entropy_forward_and_backward(dtype):
    x = (gaussian(9, 5, dtype=dtype, seed=19) * 2).requires_grad_()
    labels = torch.tensor([0, 4, 2, 1, -100, 3, 3, 0, 1])
    with sft.emulate() as mode:
        loss = torch.nn.functional.cross_entropy(x, labels)
        loss.backward()
    assert not mode.fallbacks
    grad, x.grad = x.grad, None
    native = torch.nn.functional.cross_entropy(x, labels)
    native.backward()
    assert abs(loss.item() - native.item()) <= abs(native.item()) * 2.0 ** -7
    assert torch.allclose(grad.float(), x.grad.float(), atol=2.0 ** -10, rtol=2.0 ** -6)
    assert (grad[4] == 0).all()  # the ignored sample
    # The definition: -log_softmax at the targets, summed in FP32 in order, divided by the count.
    x32 = x.detach().float()
    shifted = x32 - x32.amax(1, keepdim=True)
    from sim import fp32math
    totals = kloop_sum(exp32_reference(shifted))
    logs = torch.from_numpy(fp32math.log(totals.numpy().view(np.uint32)).view(np.int32)).view(torch.float32)
    log_probabilities = (shifted - logs[:, None]).to(dtype)
    keep = labels != -100
    picked = -log_probabilities[torch.arange(9)[keep], labels[keep]]
    want = (kloop_sum(picked.reshape(1, -1))[0] / int(keep.sum())).to(dtype)
    assert_bits_equal(loss.detach(), want, f"{dtype} cross-entropy")


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_sigmoid_and_its_backward_follow_their_fp32_definition(dtype):
    x = (gaussian(200, dtype=dtype, seed=22) * 4).requires_grad_()
    grad = gaussian(200, dtype=dtype, seed=23)
    with sft.emulate() as mode:
        y = torch.sigmoid(x)
        y.backward(grad)
    assert not mode.fallbacks
    want = (1 / (1 + exp32_reference(-x.detach().float()))).to(dtype)
    assert_bits_equal(y.detach(), want, f"{dtype} sigmoid")
    y32 = want.float()
    if dtype == torch.float16:  # torch's Half kernel: each of the three operations rounded into FP16
        def half(t):
            return t.to(dtype).float()
        expected = (half(grad.float() * half(1 - y32)) * y32).to(dtype)
    else:
        expected = (grad.float() * (1 - y32) * y32).to(dtype)
    assert_bits_equal(x.grad, expected, f"{dtype} sigmoid backward")
