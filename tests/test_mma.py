"""softfloat16.mma: GPU matrix-unit instructions against MMA-Sim (mmasim, optional: skipped with its
reason where it cannot be imported or built) and against an exact rational model written here from
the documented rule, independent of the kernels."""
import hashlib
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.formats import FORMATS
from softfloat16.mma_presets import PRESETS
from softfloat16.mma_reference import KINDS, compare, mmasim_missing, random_operands


def _configurations():
    """One preset per distinct arithmetic (presets that differ only in m or n compute alike)."""
    seen = {}
    for name, p in PRESETS.items():
        seen.setdefault((p.arch, p.instruction, p.k, p.a, p.b, p.c, p.d, p.scale, p.block, p.model), name)
    return list(seen.values())


CONFIGURATIONS = _configurations()
# The CI slice: every architecture, instruction and adder, each input format and output, scaled kinds.
SLICE = CONFIGURATIONS[::7] + [
    "volta.mma.m8n8k4.f16.f16.f16.f16", "turing.mma.m8n8k4.f32.f16.f16.f32", "ada.mma.m16n8k32.f32.e4m3.e5m2.f32",
    "hopper.wgmma.m64n8k32.f16.e5m2.e4m3", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
    "blackwell.tcgen05.m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
    "rtx_blackwell.mma.m16n8k32.kind::mxf8f6f4.block32.f32.e3m2.e2m1.f32.ue8m0",
    "cdna1.mfma.f32_32x32x8f16", "cdna2.mfma.f32_32x32x4bf16", "cdna2.mfma.f32_16x16x16bf16_1k",
    "cdna3.mfma.f32_16x16x32_fp8_bf8", "cdna3.mfma.f32_32x32x4_xf32", "cdna3.mfma.f32_16x16x4_f32",
]
needs_mmasim = pytest.mark.skipif(mmasim_missing() is not None, reason=str(mmasim_missing()))


def test_every_instruction_mmasim_models_is_a_preset():
    pytest.importorskip("mmasim", reason="mmasim not installed")
    if mmasim_missing():
        pytest.skip(mmasim_missing())
    from mmasim.amd import isa_mfma
    from mmasim.nv_ptx import isa_mma, isa_tcgen05mma, isa_wgmma
    arch = {"Volta": "volta", "Turing": "turing", "Ampere": "ampere", "Ada Lovelace": "ada", "Hopper": "hopper",
            "Blackwell": "blackwell", "RTX Blackwell": "rtx_blackwell", "CDNA1": "cdna1", "CDNA2": "cdna2",
            "CDNA3": "cdna3"}
    theirs = set()
    for table, instruction in ((isa_mma.mma_shape_and_type, "mma"), (isa_mma.mma_block_scale_shape_and_type, "mma"),
                               (isa_wgmma.wgmma_shape_and_type, "wgmma"),
                               (isa_tcgen05mma.tcgen05mma_shape_and_type, "tcgen05"),
                               (isa_tcgen05mma.tcgen05mma_block_scale_shape_and_type, "tcgen05"),
                               (isa_mfma.arch_mfma_suffix, "mfma")):
        theirs |= {f"{arch[a]}.{instruction}.{s}" for a, names in table.items() for s in names}
    assert set(sf.mma.presets()) == theirs
    assert len({name for name in theirs if "f64" in name}) == 12


@needs_mmasim
@pytest.mark.parametrize("name", SLICE)
def test_matches_mmasim(name):
    p = PRESETS[name]
    for number, kind in enumerate(KINDS):
        k = p.k * (1 + number % 3)
        cases, mismatches, examples = compare(name, 5, 4, k, kind, seed=number)
        assert mismatches == 0, (kind, examples)


@needs_mmasim
@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k32.f32.e4m3.e5m2", "ampere.mma.m16n8k16.f16.f16.f16.f16",
                                  "blackwell.tcgen05.m128n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0",
                                  "cdna3.mfma.f32_16x16x16_bf16"])
def test_long_chains_match_mmasim(name):
    """K = 4096: hundreds of chained instructions, each D fed back as C."""
    assert compare(name, 3, 3, 4096, "mixed", seed=5)[1] == 0


# --- an exact rational model of the NVIDIA rule, written from its description -----------------------
def _value(bits, fmt):
    v = fmt.value(int(bits))
    return Fraction(v) if not isinstance(v, float) else v


def _exponent(v: Fraction, emin: int) -> int:
    """The exponent of the leading bit of a nonzero value, at least emin (a subnormal's)."""
    e = abs(v.numerator).bit_length() - abs(v.denominator).bit_length()
    if Fraction(2) ** e > abs(v):
        e -= 1
    return max(e, emin)


def _nvidia_rule(a, b, c, fmt_a, fmt_b, frac_bits, e_zero, step):
    """FP32 output, round toward zero: every step aligns on the largest e_a + e_b (zero terms at
    e_zero), truncates every term to frac_bits bits below it, sums exactly, truncates to FP32."""
    emin_a, emin_b = 1 - fmt_a.bias, 1 - fmt_b.bias
    acc = Fraction(0) if c is None else _value(c, FORMATS["fp32"])
    for t0 in range(0, len(a), step):
        terms = []
        for x, y in zip(a[t0:t0 + step], b[t0:t0 + step]):
            va, vb = _value(x, fmt_a), _value(y, fmt_b)
            p = va * vb
            terms.append((p, e_zero if p == 0 else _exponent(va, emin_a) + _exponent(vb, emin_b)))
        terms.append((acc, e_zero if acc == 0 else _exponent(acc, -126)))
        quantum = Fraction(2) ** (max(e for _, e in terms) - frac_bits)
        total = sum(int(v / quantum) * quantum for v, _ in terms)  # int() truncates toward zero
        acc = Fraction(0) if total == 0 else total
        if abs(acc) >= 2 ** 128:  # truncation stays in the binade: past FP32's top it is inf
            return float("inf") if acc > 0 else float("-inf")
        if acc:  # toward zero into FP32
            e = _exponent(acc, -126)
            ulp = Fraction(2) ** (e - 23)
            acc = int(acc / ulp) * ulp
    return acc


@pytest.mark.parametrize("name, frac_bits, e_zero", [
    ("volta.mma.m8n8k4.f32.f16.f16.f32", 23, -131), ("ampere.mma.m16n8k16.f32.bf16.bf16.f32", 24, -132),
    ("hopper.wgmma.m64n8k16.f32.f16.f16", 25, -133),
    ("blackwell.tcgen05.m64n8k32.kind::f8f6f4.f32.e2m3.e5m2", 25, -133),
])
def test_nvidia_rule_exact_model(name, frac_bits, e_zero):
    p = PRESETS[name]
    fmt_a, fmt_b = FORMATS[p.a], FORMATS[p.b]
    for kind in ("near_one", "tiny", "cancel", "wide"):
        a, b, c, _, _ = random_operands(p, 3, 3, 2 * p.k, kind, seed=3)
        d = sf.mma.mma(a, b, c, name)
        for i in range(3):
            for j in range(3):
                want = _nvidia_rule(a[i], b[:, j], c[i, j], fmt_a, fmt_b, frac_bits, e_zero, p.model.products_per_step)
                assert _value(d[i, j], FORMATS["fp32"]) == want, (kind, i, j)


def test_alignment_on_the_exponent_sum_keeps_one_more_bit():
    """1.5 * 1.5 = 2.25 aligns at 2**0 (e_a + e_b), not 2**1: with 23 bits kept, 2**-23 survives."""
    a = np.array([[0x3E00, 0x3400, 0, 0]], np.uint16)  # fp16 1.5, 2**-2
    b = np.array([[0x3E00], [0x0001], [0], [0]], np.uint16)  # 1.5, 2**-24: the product 2**-26 is truncated away
    d = sf.mma.mma(a, b, None, "volta.mma.m8n8k4.f32.f16.f16.f32")
    assert sf.fp32.value(int(d[0, 0])) == Fraction(9, 4)
    b[1, 0] = 0x3C00  # 2**-2 * 1: kept
    d = sf.mma.mma(a, b, None, "volta.mma.m8n8k4.f32.f16.f16.f32")
    assert sf.fp32.value(int(d[0, 0])) == Fraction(5, 2)


def test_overflow_is_inf_and_nan_is_one_pattern():
    bf16_max, two = np.full((1, 16), 0x7F7F, np.uint16), np.full((16, 1), 0x4000, np.uint16)
    d = sf.mma.mma(bf16_max, two, None, "hopper.wgmma.m64n8k16.f32.bf16.bf16")  # 2**129: inf, not FP32's max
    assert d[0, 0] == 0x7F800000
    a = np.array([[0x7BFF] * 16], np.uint16)  # fp16 max
    b = np.full((16, 1), 0x7BFF, np.uint16)
    assert sf.mma.mma(a, b, None, "hopper.wgmma.m64n8k16.f16.f16.f16")[0, 0] == 0x7C00
    a[0, 1] = 0x7E01  # a NaN with a payload
    assert sf.mma.mma(a, b, None, "hopper.wgmma.m64n8k16.f32.f16.f16")[0, 0] == 0x7FFFFFFF
    assert sf.mma.mma(a, b, None, "hopper.wgmma.m64n8k16.f16.f16.f16")[0, 0] == 0x7FFF


def test_padding_equals_explicit_zeros_and_threads_agree():
    p = PRESETS["ampere.mma.m16n8k16.f32.f16.f16.f32"]
    a, b, c, _, _ = random_operands(p, 9, 7, 37, "mixed", seed=1)
    padded = sf.mma.mma(np.pad(a, ((0, 0), (0, 11))), np.pad(b, ((0, 11), (0, 0))), c, p)
    assert np.array_equal(sf.mma.mma(a, b, c, p), padded)
    digests = set()
    for threads in (1, 2):
        sf.set_num_threads(threads)
        try:
            digests.add(hashlib.sha256(sf.mma.mma(a, b, c, p).tobytes()).hexdigest())
        finally:
            sf.set_num_threads(None)
    assert len(digests) == 1


def test_float_arrays_are_read_as_bits():
    a = np.array([[1.0, 2.0, 0.5, 0.0]], np.float16)
    b = np.ones((4, 1), np.float16)
    d = sf.mma.mma(a, b, None, "volta.mma.m8n8k4.f32.f16.f16.f32")
    assert d.dtype == np.uint32 and d.view(np.float32)[0, 0] == 3.5


def test_bad_input_one_line_each():
    a = np.zeros((2, 16), np.uint16)
    b = np.zeros((16, 3), np.uint16)
    with pytest.raises(ValueError, match=r"unknown 'hoper.wgmma.m64n8k16.f32.f16.f16'; closest: hopper\.wgmma"):
        sf.mma.mma(a, b, None, "hoper.wgmma.m64n8k16.f32.f16.f16")
    with pytest.raises(ValueError, match="do not chain"):
        sf.mma.mma(a, b[:8], None, "ampere.mma.m16n8k16.f32.f16.f16.f32")
    with pytest.raises(TypeError, match="fp16 operands must be"):
        sf.mma.mma(a.astype(np.float32), b, None, "ampere.mma.m16n8k16.f32.f16.f16.f32")
    with pytest.raises(ValueError, match="c: expected shape"):
        sf.mma.mma(a, b, np.zeros((3, 2), np.uint32), "ampere.mma.m16n8k16.f32.f16.f16.f32")
    with pytest.raises(ValueError, match="takes no scales"):
        sf.mma.mma(a, b, None, "ampere.mma.m16n8k16.f32.f16.f16.f32", scale_a=np.zeros((2, 1)), scale_b=None)
    with pytest.raises(ValueError, match="a_format: .* takes fp16 operands"):
        sf.mma.mma(a, b, None, "ampere.mma.m16n8k16.f32.f16.f16.f32", a_format="bf16")
    with pytest.raises(ValueError, match="arch: expected one of"):
        sf.mma.presets("pascal")
    scaled = "rtx_blackwell.mma.m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0"
    a8, b8 = np.zeros((2, 32), np.uint8), np.zeros((32, 3), np.uint8)
    with pytest.raises(ValueError, match="takes scale_a and scale_b"):
        sf.mma.mma(a8, b8, None, scaled)
    with pytest.raises(ValueError, match=r"scale_b: expected shape \(1, 3\)"):
        sf.mma.mma(a8, b8, None, scaled, scale_a=np.zeros((2, 1), np.uint8), scale_b=np.zeros((3, 1), np.uint8))
    with pytest.raises(ValueError, match="not a multiple of"):
        sf.mma.mma(a8[:, :16], b8[:16], None, scaled, scale_a=np.zeros((2, 0), np.uint8),
                   scale_b=np.zeros((0, 3), np.uint8))


# --- the GEMM level: promotion, split-K, linalg.matmul and the torch mode --------------------------
def _fp32_sequential_sum(parts):
    """((p_0 + p_1) + p_2) + ... in numpy float32 (hardware round to nearest even)."""
    total = parts[0].view(np.float32).copy()
    for part in parts[1:]:
        total = (total + part.view(np.float32)).astype(np.float32)
    return total.view(np.uint32)


def test_promotion_and_split_k_add_partials_in_fp32():
    p = PRESETS["hopper.wgmma.m64n8k32.f32.e4m3.e5m2"]
    a, b, _, _, _ = random_operands(p, 4, 6, 512, "near_one", seed=2)
    chunks = [sf.mma.mma(a[:, lo:lo + 128], b[lo:lo + 128], None, p) for lo in range(0, 512, 128)]
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.array_equal(sf.mma.gemm(a, b, p, promote_every=128), _fp32_sequential_sum(chunks))
        halves = [sf.mma.mma(a[:, lo:lo + 256], b[lo:lo + 256], None, p) for lo in (0, 256)]
        assert np.array_equal(sf.mma.gemm(a, b, p, split_k=2), _fp32_sequential_sum(halves))
    assert not np.array_equal(sf.mma.gemm(a, b, p), sf.mma.gemm(a, b, p, promote_every=128))
    with pytest.raises(ValueError, match="promote_every: 100 is not a multiple"):
        sf.mma.gemm(a, b, p, promote_every=100)
    with pytest.raises(ValueError, match="split_k: expected a positive integer"):
        sf.mma.gemm(a, b, p, split_k=0)


def test_linalg_matmul_takes_instruction_presets():
    name = "ampere.mma.m16n8k16.f32.bf16.bf16.f32"
    a, b, _, _, _ = random_operands(PRESETS[name], 3, 4, 64, "mixed", seed=4)
    d = sf.linalg.matmul(a, b, "bf16", out_format="fp32", order="tensorcore", tensor_core=name)
    assert np.array_equal(d, sf.mma.mma(a, b, None, name))
    d16 = sf.linalg.matmul(a, b, "bf16", order="tensorcore", tensor_core=name, rounding="rtz")
    assert np.array_equal(d16, sf.convert(d, src="fp32", dst="bf16", rounding="rtz"))
    with pytest.raises(ValueError, match="fmt: .* takes bf16 operands, got fp16"):
        sf.linalg.matmul(a, b, "fp16", order="tensorcore", tensor_core=name)
    with pytest.raises(ValueError, match="accumulate: .* accumulates in fp32"):
        sf.linalg.matmul(a, b, "bf16", accumulate="bf16", order="tensorcore", tensor_core=name)
    with pytest.raises(ValueError, match=r"split_k: only order=.tensorcore. \(a GPU instruction\) takes it"):
        sf.linalg.matmul(a, b, "bf16", split_k=2)
    with pytest.raises(ValueError, match="tensor_core: .* unknown 'ampere.mma.m16n8k16.f32.bf16.bf16.f64'"):
        sf.linalg.matmul(a, b, "bf16", order="tensorcore", tensor_core="ampere.mma.m16n8k16.f32.bf16.bf16.f64")


def test_torch_mode_linear_on_a_preset():
    torch = pytest.importorskip("torch")
    from softfloat16.torch import emulate
    name = "hopper.wgmma.m64n8k16.f32.f16.f16"
    x = torch.randn(3, 32, dtype=torch.float16, generator=torch.Generator().manual_seed(0))
    w = torch.randn(5, 32, dtype=torch.float16, generator=torch.Generator().manual_seed(1))
    with emulate(order="tensorcore", tensor_core=name):
        y = torch.nn.functional.linear(x, w)
    d = sf.mma.mma(x.view(torch.int16).numpy().view(np.uint16), w.T.contiguous().view(torch.int16).numpy().view(
        np.uint16), None, name)
    want = sf.convert(d, src="fp32", dst="fp16")
    assert np.array_equal(y.view(torch.int16).numpy().view(np.uint16), want)


def test_mx_matmul_on_block_scaled_instructions():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 128)) * 2.0 ** rng.integers(-20, 20, (5, 1))).astype(np.float32)
    w = rng.standard_normal((128, 3)).astype(np.float32)
    a, b = sf.mx.quantize(x, "mxfp8_e4m3", axis=1), sf.mx.quantize(w, "mxfp8_e5m2", axis=0)
    name = "blackwell.tcgen05.m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e5m2.ue8m0"
    want = sf.mma.mma(a.elements, b.elements, None, name, scale_a=a.scales, scale_b=b.scales)
    assert np.array_equal(sf.mx.matmul(a, b, name), want)
    assert np.array_equal(sf.mx.matmul(a, b, name, promote_every=64),
                          sf.mma.gemm(a.elements, b.elements, name, promote_every=64, scale_a=a.scales,
                                      scale_b=b.scales))
    a, b = sf.mx.quantize(x, "nvfp4", axis=1), sf.mx.quantize(w, "nvfp4", axis=0)
    name = "blackwell.tcgen05.m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
    d = sf.mma.mma(a.elements, b.elements, None, name, scale_a=a.scales, scale_b=b.scales)
    factor = np.float32(np.uint32(a.tensor_scale).view(np.float32)) * np.uint32(b.tensor_scale).view(np.float32)
    assert np.array_equal(sf.mx.matmul(a, b, name).view(np.float32), d.view(np.float32) * factor)
    with pytest.raises(ValueError, match="takes blocks of 32"):
        sf.mx.matmul(sf.mx.quantize(x, "mxfp4_e2m1", axis=1, block_size=16),
                     sf.mx.quantize(w, "mxfp4_e2m1", axis=0, block_size=16),
                     "blackwell.tcgen05.m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0")
    with pytest.raises(ValueError, match="not block-scaled"):
        sf.mx.matmul(a, b, "hopper.wgmma.m64n8k32.f32.e4m3.e4m3")
    with pytest.raises(ValueError, match="only a GPU instruction"):
        sf.mx.matmul(a, b, split_k=2)
