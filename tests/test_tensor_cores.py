"""order="tensorcore": GPUs by name, instruction presets and TensorCore(B, F), all on the one model.

The exact-rational model below is written from the rule's statement (softfloat16.tensor_cores.
TensorCore) with fractions.Fraction and the oracle's decoder and one-rounding encoder; it shares
no code with the kernels.
"""
from fractions import Fraction

import numpy as np
import oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import softfloat16 as sf
import softfloat16.linalg as linalg
from softfloat16 import tensor_cores


def _alignment_exponent(value: Fraction, fmt: str) -> int:
    """The exponent of the leading bit of a nonzero value; a subnormal's is the format's minimum."""
    e = abs(value.numerator).bit_length() - abs(value.denominator).bit_length()
    if Fraction(2) ** e > abs(value):
        e -= 1
    return max(e, oracle.spec(fmt).emin)


def model_dot(row, column, fmt: str, block: int, fraction_bits: int, zero_exponent: int, out: str) -> int:
    """Bits of one output element of TensorCore(block, fraction_bits, zero_exponent), finite inputs:
    per block of products (K padded with zero products) and the accumulator, align on the largest
    e_a + e_b (a zero term at zero_exponent), truncate every term below 2**(that - F), add exactly,
    round toward zero into FP32 (inf past its range); at the end round to nearest even into ``out``."""
    pairs = list(zip(row, column))
    pairs += [(0, 0)] * (-len(pairs) % block)
    acc = Fraction(0)
    for start in range(0, len(pairs), block):
        terms = [(acc, zero_exponent if acc == 0 else _alignment_exponent(acc, "fp32"))]
        for x, y in pairs[start:start + block]:
            va, vb = oracle.to_fraction(x, fmt), oracle.to_fraction(y, fmt)
            exponent = zero_exponent if va * vb == 0 else _alignment_exponent(va, fmt) + _alignment_exponent(vb, fmt)
            terms.append((va * vb, exponent))
        quantum = Fraction(2) ** (max(e for _, e in terms) - fraction_bits)
        total = sum(int(v / quantum) * quantum for v, _ in terms)  # int() truncates toward zero
        if abs(total) >= 2**128:  # truncation keeps the binade: past FP32's top it is inf (in any output)
            return oracle.encode_round(abs(total), int(total < 0), out, "rne")[0]
        bits, _ = oracle.encode_round(abs(total), int(total < 0), "fp32", "rtz")
        acc = oracle.to_fraction(bits, "fp32")
    return oracle.encode_round(abs(acc), int(acc < 0), out, "rne")[0]


def kernel_dot(row, column, fmt, core, out):
    a = np.asarray([row], dtype=fmt.dtype)
    b = np.asarray(column, dtype=fmt.dtype).reshape(len(column), 1)
    return int(linalg.matmul(a, b, fmt, out_format=out, order="tensorcore", tensor_core=core)[0, 0])


def finite_bits(fmt: sf.Format, min_field: int = 0, max_field: int | None = None):
    top = (1 << fmt.exponent_bits) - 2 if max_field is None else max_field
    return st.builds(lambda sign, field, fraction: (sign << (fmt.width - 1)) | (field << fmt.fraction_bits) | fraction,
                     st.integers(0, 1), st.integers(min_field, top), st.integers(0, (1 << fmt.fraction_bits) - 1))


CORES = [tensor_cores.TensorCore(16, 25), tensor_cores.TensorCore(4, 23), tensor_cores.TensorCore(8, 24),
         tensor_cores.TensorCore(3, 6), tensor_cores.TensorCore(32, 13, -120)]
# Exponent fields where products and their sums stay inside FP32's range (bf16, fp32), every one
# (fp16), and E4M3's finite ones.
FORMATS = [(sf.fp16, (0, None)), (sf.bf16, (64, 190)), (sf.fp8_e4m3fn, (0, 15)), (sf.fp32, (64, 190))]


@pytest.mark.parametrize("fmt, fields", FORMATS, ids=lambda f: getattr(f, "name", ""))
@pytest.mark.parametrize("core", CORES, ids=lambda c: f"B{c.products_per_block}F{c.fraction_bits}")
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_tensor_core_matches_the_fraction_model(fmt, fields, core, data):
    k = data.draw(st.integers(1, 40), label="k")
    row = data.draw(st.lists(finite_bits(fmt, *fields), min_size=k, max_size=k), label="row")
    column = data.draw(st.lists(finite_bits(fmt, *fields), min_size=k, max_size=k), label="column")
    if fmt is sf.fp8_e4m3fn:  # 0x7F / 0xFF are NaN: keep the finite patterns
        row = [x if x & 0x7F != 0x7F else x - 1 for x in row]
        column = [x if x & 0x7F != 0x7F else x - 1 for x in column]
    for out in (sf.fp32, sf.fp16):
        got = kernel_dot(row, column, fmt, core, out)
        want = model_dot(row, column, fmt.name, core.products_per_block, core.fraction_bits, core.zero_exponent,
                         out.name)
        assert got == want, (hex(got), hex(want), out.name)


def test_alignment_cancellation_and_blocks():
    fp16 = sf.fp16
    one, minus_one = int(fp16.from_float(1.0)), int(fp16.from_float(-1.0))
    # Fifteen products 2**-26, then 1: each small term is truncated away (26 bits below the point
    # at 2**0, 25 kept), while a sequential FP32 sum adds them up first.
    row = [int(x) for x in fp16.from_float(np.array([2.0**-13] * 15 + [1.0]))]
    assert sf.fp32.to_float(np.uint32(kernel_dot(row, row, fp16, "h100", sf.fp32))) == 1.0
    # 1.5 * 1.5 aligns at 2**0 (e_a + e_b), not at its leading bit 2**1: 2**-25 survives with 25
    # bits kept (2.25 - 1 - 1 + 2**-25).
    a = [int(x) for x in fp16.from_float(np.array([1.5, -1.0, -1.0, 2.0**-12]))]
    b = [int(x) for x in fp16.from_float(np.array([1.5, 1.0, 1.0, 2.0**-13]))]
    assert sf.fp32.value(kernel_dot(a, b, fp16, "h100", sf.fp32)) == Fraction(1, 4) + Fraction(1, 2**25)
    # 17 products of 1 span two blocks of 16; exact cancellation gives +0.
    assert sf.fp32.to_float(np.uint32(kernel_dot([one] * 17, [one] * 17, fp16, "h100", sf.fp32))) == 17
    assert kernel_dot([one, minus_one], [one, one], fp16, "h100", fp16) == 0
    # An empty sum is +0, as in the other orders.
    empty = linalg.matmul(np.zeros((2, 0), np.uint16), np.zeros((0, 3), np.uint16), fp16, order="tensorcore")
    assert empty.shape == (2, 3) and not empty.any()


def test_accumulator_rounds_toward_zero_and_overflows_to_inf():
    bf16 = sf.bf16
    core = tensor_cores.TensorCore(16, 26)
    row = [int(bf16.from_float(v)) for v in (1.0, 2.0**-24, 2.0**-25)]
    ones = [int(bf16.from_float(1.0))] * 3
    assert sf.fp32.value(kernel_dot(row, ones, bf16, core, sf.fp32)) == 1  # 1 + 3 * 2**-25, toward zero
    big = [int(bf16.from_float(2.0**127))] * 2
    two = [int(bf16.from_float(2.0))] * 2
    assert kernel_dot(big, two, bf16, core, sf.fp32) == 0x7F800000  # not the largest finite value


def test_specials_are_the_instruction_patterns():
    fp16 = sf.fp16
    nan, inf, one = 0x7E00, 0x7C00, 0x3C00
    assert kernel_dot([one, nan], [one, one], fp16, "h100", sf.fp32) == 0x7FFFFFFF
    assert kernel_dot([inf, one], [0, one], fp16, "h100", sf.fp32) == 0x7FFFFFFF  # inf * 0
    assert kernel_dot([inf, inf | 0x8000], [one, one], fp16, "h100", sf.fp32) == 0x7FFFFFFF
    assert kernel_dot([inf] + [one] * 16, [one] * 17, fp16, "h100", sf.fp32) == 0x7F800000  # through 2 blocks


@pytest.mark.parametrize("gpu, fmt, accumulate, name", [
    ("h100", "fp16", "fp32", "hopper.wgmma.m64n256k16.f32.f16.f16"),
    ("H200", "bf16", "fp32", "hopper.wgmma.m64n256k16.f32.bf16.bf16"),
    ("h100", "fp16", "fp16", "hopper.wgmma.m64n256k16.f16.f16.f16"),
    ("a100", "fp16", "fp32", "ampere.mma.m16n8k16.f32.f16.f16.f32"),
    ("v100", "fp16", "fp32", "volta.mma.m8n8k4.f32.f16.f16.f32"),
    ("l40s", "fp8_e4m3fn", "fp32", "ada.mma.m16n8k32.f32.e4m3.e4m3.f32"),
    ("b200", "fp8_e4m3fn", "fp32", "blackwell.tcgen05.m128n256k32.kind::f8f6f4.f32.e4m3.e4m3"),
    ("mi250x", "bf16", "fp32", "cdna2.mfma.f32_16x16x16bf16_1k"),
    ("cdna3", "fp8_e4m3fnuz", "fp32", "cdna3.mfma.f32_16x16x32_fp8_fp8"),
])
def test_a_gpu_runs_the_instruction_its_gemm_kernels_issue(gpu, fmt, accumulate, name):
    assert tensor_cores.instruction(gpu, fmt, d_format=accumulate).name == name
    rng = np.random.default_rng(1)
    f = sf.format(fmt)
    a = np.asarray(sf.convert(rng.standard_normal((5, 70)).astype(np.float32).view(np.uint32), src="fp32", dst=f))
    b = np.asarray(sf.convert(rng.standard_normal((70, 3)).astype(np.float32).view(np.uint32), src="fp32", dst=f))
    by_gpu = linalg.matmul(a, b, f, accumulate=accumulate, out_format=accumulate, order="tensorcore", tensor_core=gpu)
    np.testing.assert_array_equal(by_gpu, sf.mma.gemm(a, b, name))


def test_operands_a_gpu_matrix_unit_does_not_take():
    assert tensor_cores.gemm_policy("h100", "fp32") == {"order": "sequential"}
    assert tensor_cores.gemm_policy("mi300x", "fp32") == {"order": "tensorcore", "tensor_core": "mi300x"}
    assert tensor_cores.gemm_policy(tensor_cores.TensorCore(), "fp32")["order"] == "tensorcore"
    x = sf.fp32.from_float(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"^tensor_core: h100 \(hopper\) has no instruction for fp32 x fp32"):
        linalg.matmul(x, x.T, sf.fp32, order="tensorcore", tensor_core="h100")
    with pytest.raises(ValueError, match="^accumulate: hopper.wgmma.* accumulates in fp32"):
        linalg.matmul(sf.fp16.from_float(np.ones((1, 2))), sf.fp16.from_float(np.ones((2, 1))), sf.fp16,
                      accumulate="fp16", order="tensorcore", tensor_core="hopper.wgmma.m64n8k16.f32.f16.f16")


def test_bad_tensor_core_arguments():
    x = sf.fp16.from_float(np.ones((2, 2)))
    with pytest.raises(ValueError, match="^tensor_core: expected a TensorCore, a GPU .*closest: "):
        linalg.matmul(x, x, sf.fp16, order="tensorcore", tensor_core="hopper.wgmma.m64n8k16.f32.f16.f32")
    with pytest.raises(ValueError, match="^tensor_core: expected"):
        linalg.matmul(x, x, sf.fp16, order="tensorcore", tensor_core=3)
    with pytest.raises(ValueError, match="^accumulate: a TensorCore accumulates in fp32"):
        linalg.matmul(x, x, sf.fp16, accumulate="fp16", order="tensorcore", tensor_core=tensor_cores.TensorCore())
    with pytest.raises(ValueError, match="^fmt: a TensorCore takes formats of at most 24"):
        tensor_cores.TensorCore().preset("tf32_fp32")
    with pytest.raises(ValueError, match="^split_k: only order='tensorcore'"):
        linalg.matmul(x, x, sf.fp16, split_k=2)
    for args, name in (((0, 25), "products_per_block"), ((16, 51), "fraction_bits"), ((16, 25, 2000), "zero_exponent"),
                       ((16.0, 25), "products_per_block")):
        with pytest.raises(ValueError, match=f"^{name} must be an integer"):
            tensor_cores.TensorCore(*args)


def test_threads_give_the_same_bits():
    rng = np.random.default_rng(5)
    a = sf.fp16.from_float(rng.standard_normal((64, 96)))
    b = sf.fp16.from_float(rng.standard_normal((96, 200)))
    before = sf.get_num_threads()
    try:
        sf.set_num_threads(1)
        one = linalg.matmul(a, b, sf.fp16, order="tensorcore")
        sf.set_num_threads(2)
        np.testing.assert_array_equal(linalg.matmul(a, b, sf.fp16, order="tensorcore"), one)
    finally:
        sf.set_num_threads(before)
