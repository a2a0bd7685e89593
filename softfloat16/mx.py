"""Block-scaled formats: OCP Microscaling (MX) v1.0 and NVIDIA's NVFP4, bit for bit.

A block-scaled tensor stores narrow *elements* and, per block of consecutive elements along one
axis, a shared *scale*; the value of an element is its own value times its block's scale (times a
per-tensor FP32 scale in NVFP4). docs/mx.md defines every step; in short:

- :func:`quantize` turns real numbers (float16/bfloat16/float32/float64 arrays, read exactly, or
  bit patterns of any supported format with ``src=``) into an :class:`MXTensor`;
- :func:`dequantize` (or ``MXTensor.dequantize``) gives the values back: float64 exactly, float32
  rounded once (for MX this rounding never changes a value below FP32's largest finite);
- :func:`matmul` multiplies two quantised operands the way block-scaled tensor-core MMA is
  described: an exact dot product per block, scaled exactly, rounded once to FP32, then summed in
  FP32 in increasing block order.

>>> import numpy as np, softfloat16.mx as mx
>>> q = mx.quantize(np.array([1.0, -0.3, 448.0, 0.0], np.float32), "mxfp8_e4m3")
>>> q.scales, q.elements
(array([127], dtype=uint8), array([ 56, 170, 126,   0], dtype=uint8))
>>> q.dequantize().tolist()
[1.0, -0.3125, 448.0, 0.0]
"""
from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._kernels import blockscale, core, hardware, hardware_blocks
from . import mma
from .formats import FORMATS, Format, as_bits, format as parse_format
from .ops import binary
from .rounding import Rounding, parse_rounding
from .stochastic import check_sr_bits, random_words, randomness
from .threads import parallel_gemm

__all__ = ["FORMATS_MX", "SCALE_RULES", "MXTensor", "quantize", "dequantize", "matmul"]


@dataclass(frozen=True)
class _Spec:
    """What quantize needs to know of one block-scaled format."""

    name: str
    element_format: Format | str  # a Format, or "int8" (MXINT8: two's complement k / 64)
    scale_format: Format
    block_size: int  # the default (the format's definition)
    emax: int  # exponent of the element format's largest binade (OCP's emax_elem)


FORMATS_MX = {spec.name: spec for spec in (
    _Spec("mxfp8_e4m3", FORMATS["fp8_e4m3fn"], FORMATS["e8m0"], 32, 8),
    _Spec("mxfp8_e5m2", FORMATS["fp8_e5m2"], FORMATS["e8m0"], 32, 15),
    _Spec("mxfp6_e2m3", FORMATS["fp6_e2m3"], FORMATS["e8m0"], 32, 2),
    _Spec("mxfp6_e3m2", FORMATS["fp6_e3m2"], FORMATS["e8m0"], 32, 4),
    _Spec("mxfp4_e2m1", FORMATS["fp4_e2m1"], FORMATS["e8m0"], 32, 2),
    _Spec("mxint8", "int8", FORMATS["e8m0"], 32, 0),
    _Spec("nvfp4", FORMATS["fp4_e2m1"], FORMATS["fp8_e4m3fn"], 16, 2),
)}
SCALE_RULES = ("floor", "rceil")
_NVFP4_RULE = "nvfp4"  # what an nvfp4 tensor records: its scales follow the NVFP4 recipe
# The NVFP4 recipe's constants: amax maps to E4M3's max (448) times E2M1's max (6).
_NVFP4_RANGE = Fraction(448 * 6)
_FP32_ONE = 0x3F800000
# numpy float dtypes read exactly without src=, as (exponent bits, fraction bits).
_FLOAT64 = (11, 52)


@dataclass(frozen=True, eq=False)
class MXTensor:
    """A block-scaled tensor: what :func:`quantize` returns (arrays read-only).

    - ``elements``: uint8 element patterns, shaped like the input (``fp8_e4m3fn``/``fp8_e5m2``/
      ``fp6_*``/``fp4_e2m1`` bits in the low bits; MXINT8: the two's complement byte of k, value
      k / 64);
    - ``scales``: uint8 scale patterns (E8M0 for MX, E4M3 for nvfp4), shaped like the input with
      the blocked axis cut to ``ceil(n / block_size)`` blocks;
    - ``tensor_scale``: nvfp4 only (else None): the FP32 bits of the per-tensor decode scale S_dec;
    - ``element_format``, ``scale_format``: the Formats (``"int8"`` for MXINT8's elements);
    - ``axis`` (non-negative), ``block_size``, ``scale_rule`` (``"floor"``, ``"rceil"``, or
      ``"nvfp4"``), ``shape`` (of the input).

    >>> import numpy as np, softfloat16.mx as mx
    >>> mx.quantize(np.ones((2, 40), np.float32), "mxfp4_e2m1")
    MXTensor('mxfp4_e2m1', shape=(2, 40), axis=1, block_size=32, scale_rule='floor')
    """

    fmt: str
    elements: np.ndarray
    scales: np.ndarray
    tensor_scale: np.uint32 | None
    element_format: Format | str
    scale_format: Format
    axis: int
    block_size: int
    scale_rule: str
    shape: tuple[int, ...]

    def dequantize(self, dtype=np.float32) -> np.ndarray:
        """The values: float64 exactly, or float32 (see :func:`dequantize`).

        >>> import numpy as np, softfloat16.mx as mx
        >>> mx.quantize(np.array([3.0, 0.7]), "mxfp4_e2m1").dequantize(np.float64)
        array([3. , 0.75])
        """
        return dequantize(self, dtype)

    def __repr__(self) -> str:
        return (f"MXTensor({self.fmt!r}, shape={self.shape}, axis={self.axis}, block_size={self.block_size}, "
                f"scale_rule={self.scale_rule!r})")


# --- argument checking ----------------------------------------------------------------------------

def _spec(fmt) -> _Spec:
    if isinstance(fmt, str) and fmt.strip().lower() in FORMATS_MX:
        return FORMATS_MX[fmt.strip().lower()]
    raise ValueError(f"fmt: unknown block-scaled format {fmt!r}; accepted: {', '.join(FORMATS_MX)}")


def _positive_int(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def _axis(axis, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis: expected an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis: {axis} is out of range for an array of {ndim} dimension(s)")
    return int(axis) % ndim


def _source_bits(x, src) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Bit patterns of the input and (exponent bits, fraction bits, encoding code) of their format."""
    if src is not None:
        fmt = parse_format(src)
        bits = as_bits(x, fmt, "x")
        if fmt.storage_shift:
            bits = bits >> fmt.storage_shift  # TF32 in FP32 layout: the compact pattern
        return bits, (fmt.exponent_bits, fmt.fraction_bits, fmt.encoding_code)
    arr = np.asarray(x)
    if arr.dtype == np.float64:
        return arr.view(np.int64), (*_FLOAT64, core.IEEE)
    for fmt in FORMATS.values():  # float16, float32, and ml_dtypes' bfloat16 and 8/6/4-bit dtypes
        if fmt.float_dtype_name is not None and fmt.storage_shift == 0 and arr.dtype.name == fmt.float_dtype_name:
            return as_bits(arr, fmt, "x"), (fmt.exponent_bits, fmt.fraction_bits, fmt.encoding_code)
    raise TypeError(f"x: expected float16/bfloat16/float32/float64 values, or bit patterns with src= naming "
                    f"their format; got dtype {arr.dtype}")


def _randomness(rounding: int, seed, random_bits, sr_bits, shape: tuple) -> np.ndarray | None:
    """The uint32 word of every element (flat C-order index i gets word i) for rounding='sr'."""
    check_sr_bits(sr_bits)
    seed, words = randomness(rounding == Rounding.SR, seed, random_bits, shape, what="x")
    if seed is not None:
        return random_words(seed, shape)
    return None if words is None else words.reshape(shape)


# --- exact scalar helpers (the NVFP4 per-tensor steps) ---------------------------------------------

def _fp32(value: Fraction, saturate: bool = False) -> int:
    """FP32 bits of a positive rational rounded to nearest even by core.round_pack (``saturate``:
    overflow to the largest finite value)."""
    if value == 0:
        return 0
    exp = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exp > value:
        exp -= 1  # now 2**exp <= value < 2**(exp + 1)
    scaled = value / Fraction(2) ** (exp - 61)
    sig = int(scaled) | int(scaled.denominator != 1)  # 62 bits with a jammed sticky bit
    return int(core.round_pack(0, exp - 61, sig, 8, 23, core.IEEE, core.RNE, 0, 0, int(saturate), 0, 32)[0])


def _fp32_value(bits: int) -> Fraction:
    return Fraction(float(np.uint32(bits).view(np.float32)))


def _bits_value(bits: int, ebits: int, fbits: int, encoding: int) -> Fraction:
    """Exact value of a finite pattern of any format (float64 included)."""
    cls, sign, exp, sig = core.unpack(int(bits), ebits, fbits, encoding, 0)
    return (-1) ** sign * Fraction(sig) * Fraction(2) ** exp if cls == core.FINITE else Fraction(0)


def _nvfp4_tensor_scales(amax: Fraction) -> tuple[int, int]:
    """(coefficient, S_dec) as FP32 bits, from the tensor's amax (docs/mx.md, NVFP4)."""
    encode = _fp32(_NVFP4_RANGE / amax, saturate=True) if amax else 0
    if encode == 0:
        encode = _FP32_ONE  # amax 0 (or beyond FP32's range): S_enc = 1, as Transformer Engine does
    sixth = _fp32(Fraction(1, 6))
    coefficient = _fp32(_fp32_value(encode) * _fp32_value(sixth))
    decode = _fp32(1 / _fp32_value(encode), saturate=True)
    return coefficient, decode


# --- quantize ------------------------------------------------------------------------------------

@functools.cache
def _mx_kernel(spec_name: str, src: tuple[int, int, int], rounding: int, stochastic: bool, block_size: int):
    spec = FORMATS_MX[spec_name]
    element = spec.element_format
    if element == "int8":
        ebits = fbits = encoding = 0
        max_normalized = 127 << (61 - 6)
        nan_fill = 0
    else:
        ebits, fbits, encoding = element.exponent_bits, element.fraction_bits, element.encoding_code
        _, _, _, max_sig = core.unpack(element.max_finite, ebits, fbits, encoding, 0)
        max_normalized = max_sig << (61 - (max_sig.bit_length() - 1))
        nan_fill = element.default_nan if element.has_nan else 0
    return blockscale.make_mx_quantizer(*src, ebits, fbits, encoding, element == "int8", spec.emax, max_normalized,
                                        nan_fill, rounding, stochastic, block_size)


@functools.cache
def _nvfp4_kernel(src: tuple[int, int, int], rounding: int, stochastic: bool, block_size: int):
    return blockscale.make_nvfp4_quantizer(*src, rounding, stochastic, block_size)


def quantize(x, fmt: str, axis: int = -1, block_size: int | None = None, scale_rule: str = "floor",
             rounding: str = "rne", *, src=None, seed: int | None = None, random_bits=None,
             sr_bits: int = 32) -> MXTensor:
    """Quantise ``x`` into a block-scaled format, blocks of ``block_size`` along ``axis``.

    ``fmt``: ``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp6_e2m3``, ``mxfp6_e3m2``, ``mxfp4_e2m1``,
    ``mxint8`` (OCP MX v1.0: E8M0 scales, blocks of 32 by default) or ``nvfp4`` (E2M1 elements,
    E4M3 scales, blocks of 16 by default, one FP32 per-tensor scale). ``x``: float16, bfloat16,
    float32 or float64 values (read exactly), or bit patterns of the format ``src`` names.
    Along ``axis``, block b holds elements b*block_size ... (b+1)*block_size - 1; when the length
    is not a multiple of block_size the last block is shorter, and its scale comes from its own
    elements (the same as padding with zeros).

    MX scales (``scale_rule``; amax = the largest magnitude in the block, emax = the exponent of
    the element format's largest binade: E4M3 8, E5M2 15, E2M3 2, E3M2 4, E2M1 2, INT8 0):

    - ``"floor"`` (OCP MX v1.0): shared = floor(log2(amax)) - emax;
    - ``"rceil"`` (NVIDIA's MXFP8 recipe): shared = the smallest integer with
      amax / 2**shared <= the element format's largest value (exactly, not via an FP32 division);

    shared is clamped to E8M0's [-127, 127], and the scale pattern is shared + 127. Each element is
    x / 2**shared (exact) rounded once in ``rounding`` and saturated to the element format's range
    (MXINT8: two's complement, k/64 for k in -128..127). A block of zeros gets the smallest scale
    (0x00 = 2**-127) and zero elements (signs kept where the element format has -0); a block
    holding an inf or NaN gets the NaN scale 0xFF (OCP MX: the whole block is then NaN) and every
    element the element format's NaN (E4M3 0x7F, E5M2 0x7E), or 0 where there is none.

    NVFP4 (``scale_rule`` left at its default; the result records ``"nvfp4"``), following NVIDIA's
    recipe as Transformer Engine implements it, every fl32 an FP32 operation rounded to nearest
    even on the exact operands: amax = the largest finite magnitude of the whole tensor;
    S_enc = fl32(2688 / amax) (FLT_MAX if that overflows; 1 if amax is 0); S_dec = fl32(1 / S_enc)
    (the per-tensor scale kept in ``tensor_scale``); per block, scale = E4M3(fl32(amax_b *
    fl32(S_enc * fl32(1/6)))) rounded to nearest even and saturating to 448; factor = fl32(1 /
    fl32(scale * S_dec)) (FLT_MAX for a zero scale); element = E2M1(fl32(x * factor)) rounded in
    ``rounding``, saturating to 6. A block holding an inf or NaN gets the E4M3 NaN scale 0x7F and
    zero elements; such values are left out of the tensor's amax.

    ``rounding``: "rne" (default), "rna", "rtz", "rup", "rdn", "rod" or "sr" (stochastic: pass
    ``seed=`` or ``random_bits=``; element i of the flat, C-order element array gets Philox word
    i or random_bits' element i, its top ``sr_bits`` bits being the random integer, as in
    docs/formats-spec.md).

    >>> import numpy as np, softfloat16.mx as mx
    >>> x = np.array([[0.5, -6.0, 7.0], [0.0, 0.0, -0.0]], np.float32)
    >>> q = mx.quantize(x, "mxfp4_e2m1", block_size=2)
    >>> q.scales.tolist()        # blocks [0.5, -6], [7] | [0, 0], [-0]
    [[127, 127], [0, 0]]
    >>> q.dequantize().tolist()  # 7 saturates to E2M1's largest, 6
    [[0.5, -6.0, 6.0], [0.0, 0.0, -0.0]]
    >>> r = mx.quantize(x, "mxfp4_e2m1", block_size=2, scale_rule="rceil")
    >>> r.scales.tolist(), r.dequantize()[0].tolist()  # 7 / 2 = 3.5 rounds to 4 (ties to even)
    ([[127, 128], [0, 0]], [0.5, -6.0, 8.0])
    """
    spec = _spec(fmt)
    block_size = spec.block_size if block_size is None else _positive_int(block_size, "block_size")
    if spec.name == "nvfp4":
        if scale_rule not in ("floor", _NVFP4_RULE):
            raise ValueError(f"scale_rule: nvfp4 scales follow the NVFP4 recipe; leave scale_rule at its default "
                             f"(got {scale_rule!r})")
        rule_name = _NVFP4_RULE
    else:
        if scale_rule not in SCALE_RULES:
            raise ValueError(f"scale_rule: unknown scale rule {scale_rule!r}; accepted: {', '.join(SCALE_RULES)}")
        rule_name = scale_rule
    mode = parse_rounding(rounding)
    bits, source = _source_bits(x, src)
    if bits.ndim == 0:
        raise ValueError("axis: x is a scalar; quantize needs at least one dimension to block")
    axis = _axis(axis, bits.ndim)
    shape = bits.shape
    words = _randomness(mode, seed, random_bits, sr_bits, shape)

    # Work on a (rows, n) view whose last axis is the blocked one.
    n = shape[axis]
    moved_shape = shape[:axis] + shape[axis + 1:] + (n,)
    rows = int(np.prod(moved_shape[:-1], dtype=np.int64))
    flat = np.ascontiguousarray(np.moveaxis(bits, axis, -1)).reshape(rows, n)
    random = (np.ascontiguousarray(np.moveaxis(words, axis, -1)).reshape(rows, n) if words is not None
              else np.zeros((rows, 0), np.uint32))
    blocks = -(-n // block_size)
    # Compile-time constants where speed matters (rne, the format's own block size): see blockscale.
    fixed = blockscale.FIXED_RNE if mode == Rounding.RNE else blockscale.RUNTIME_ROUNDING
    fixed_block_size = block_size if block_size == spec.block_size else blockscale.RUNTIME_BLOCK_SIZE
    elements = np.empty((rows, n), np.uint8)
    scales = np.empty((rows, blocks), np.uint8)
    tensor_scale = None
    if spec.name == "nvfp4":
        largest = blockscale.finite_amax_bits(flat.reshape(-1), *source)
        coefficient, decode = _nvfp4_tensor_scales(abs(_bits_value(largest, *source)))
        kernel = _nvfp4_kernel(source, fixed, words is not None, fixed_block_size)
        kernel(flat, random, int(mode), block_size, int(sr_bits), coefficient, decode, elements, scales)
        tensor_scale = np.uint32(decode)
    else:
        rule = blockscale.FLOOR if rule_name == "floor" else blockscale.RCEIL
        kernel = _mx_kernel(spec.name, source, fixed, words is not None, fixed_block_size)
        kernel(flat, random, rule, int(mode), block_size, int(sr_bits), elements, scales)

    def restore(array: np.ndarray, length: int) -> np.ndarray:
        array = np.moveaxis(array.reshape(moved_shape[:-1] + (length,)), -1, axis)
        array = np.ascontiguousarray(array)
        array.flags.writeable = False
        return array

    return MXTensor(spec.name, restore(elements, n), restore(scales, blocks), tensor_scale, spec.element_format,
                    spec.scale_format, axis, block_size, rule_name, tuple(shape))


# --- dequantize ----------------------------------------------------------------------------------

@functools.cache
def _element_values(element_format: Format | str) -> np.ndarray:
    """float64 value of each of the 256 element patterns (MXINT8: the byte's k / 64)."""
    if element_format == "int8":
        return (np.arange(256) - 256 * (np.arange(256) >= 128)) / 64.0
    values = np.zeros(256)
    for pattern in range(1 << element_format.width):
        value = element_format.value(pattern)
        values[pattern] = value if isinstance(value, float) else float(value)  # exact: at most 8 bits
    return values


@functools.cache
def _scale_values(scale_format: Format) -> np.ndarray:
    """float64 value of each of the 256 scale patterns (NaN for the NaN ones)."""
    return _element_values(scale_format)


def dequantize(q: MXTensor, dtype=np.float32) -> np.ndarray:
    """The values of a quantised tensor, shaped like the original input.

    Each value is element * block scale (MX), or element * block scale * S_dec (nvfp4), computed
    exactly. ``dtype=np.float64`` returns it exactly (always possible: at most 30 significant
    bits). ``dtype=np.float32`` rounds it once to nearest even. For MX that rounding changes
    nothing for every value whose magnitude is at most FP32's largest finite: element and scale
    have at most 8 significant bits together and every product lies at or above 2**-143 (a
    magnitude of 2**128 or more, from float64 inputs or an rceil block rounding up next to
    FLT_MAX, becomes inf). For nvfp4 it is the one correctly rounded FP32 of the exact value.
    Elements of a NaN-scale block are NaN.

    >>> import numpy as np, softfloat16.mx as mx
    >>> q = mx.quantize(np.array([0.1, 0.2, np.nan, 4.0], np.float32), "mxfp8_e5m2", block_size=2)
    >>> mx.dequantize(q, np.float64).tolist()
    [0.09375, 0.1875, nan, nan]
    """
    if not isinstance(q, MXTensor):
        raise TypeError(f"q: expected an MXTensor (from softfloat16.mx.quantize), got {type(q).__name__}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype: expected float32 or float64, got {dtype}")
    n = q.shape[q.axis]
    values = _element_values(q.element_format)[q.elements]
    scales = np.repeat(_scale_values(q.scale_format)[q.scales], q.block_size, axis=q.axis)
    scales = np.take(scales, np.arange(n), axis=q.axis)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = values * scales  # exact: at most 4 + 8 significant bits, within float64's range
        if q.tensor_scale is not None:
            exact = exact * float(np.uint32(q.tensor_scale).view(np.float32))  # 30 bits at most: exact
        if dtype == np.float64:
            return exact
    # Rounded to FP32 by the core, not numpy's conversion: that one runs in the caller's floating-point
    # environment (flush to zero or a directed rounding mode set elsewhere would change the bits).
    return np.asarray(FORMATS["fp32"].from_float(exact)).view(np.float32)


# --- matmul --------------------------------------------------------------------------------------

@functools.cache
def _element_table(element_format: Format | str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per element pattern: (signed significand, exponent above the format's lowest, class), and
    that lowest exponent (value = sig * 2**(exp + lowest)); infinities carry their sign as +-1."""
    sig = np.zeros(256, np.int64)
    exp = np.zeros(256, np.int64)
    cls = np.full(256, core.ZERO, np.int8)
    if element_format == "int8":
        k = np.arange(256) - 256 * (np.arange(256) >= 128)
        sig[:] = k
        cls[k != 0] = core.FINITE
        return sig, exp, cls, -6
    ebits, fbits, encoding = element_format.exponent_bits, element_format.fraction_bits, element_format.encoding_code
    lowest = element_format.min_subnormal_exponent
    for pattern in range(1 << element_format.width):
        c, s, e, g = core.unpack(pattern, ebits, fbits, encoding, 0)
        cls[pattern] = c
        if c == core.FINITE:
            sig[pattern], exp[pattern] = (-g if s else g), e - lowest
        elif c == core.INF:
            sig[pattern] = -1 if s else 1
    return sig, exp, cls, lowest


@functools.cache
def _scale_table(scale_format: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per scale pattern: (significand, exponent, is NaN); a zero scale has significand 0."""
    sig, exp, cls, lowest = _element_table(scale_format)
    return np.abs(sig), exp + lowest, cls == core.NAN


def matmul(a: MXTensor, b: MXTensor, preset: str | None = None, *, split_k: int = 1,
           promote_every: int | None = None) -> np.ndarray:
    """Block-scaled matrix product of ``a`` (M, K), quantised along its last axis, and ``b`` (K, N),
    quantised along its first, with the same block size. The MX formats mix freely (E4M3 activations
    times E5M2 gradients, as FP8 training does: they share the E8M0 scale); nvfp4 meets only nvfp4.
    Returns FP32 bits (uint32).

    C[i, j]: for each block of K in increasing order, the exact dot product of the element values
    (exact sum of exact products), times the two block scales (exact), rounded once to FP32 (to
    nearest even), is added to an FP32 accumulator that starts at +0 (each addition rounded to
    nearest even). nvfp4: the sum is finally multiplied by fl32(S_dec_a * S_dec_b), one FP32
    multiplication (nearest even). A NaN scale, a NaN element, inf * 0 or inf - inf make C[i, j]
    NaN (0x7FC00000); an exactly zero block adds +0, so C is never -0.

    >>> import numpy as np, softfloat16.mx as mx
    >>> a = mx.quantize(np.array([[1.0, 2.0, 3.0, 4.0]]), "mxfp8_e4m3", axis=1, block_size=2)
    >>> b = mx.quantize(np.array([[1.0], [1.0], [1.0], [0.5]]), "mxfp8_e4m3", axis=0, block_size=2)
    >>> mx.matmul(a, b).view(np.float32)
    array([[8.]], dtype=float32)

    ``preset``: a block-scaled GPU instruction (``softfloat16.mma``, e.g.
    ``"blackwell.tcgen05.m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"``, or an ``mxf4nvf4``
    ``block16 ... ue4m3`` one for nvfp4): the product is then that instruction's, chained over K as
    the hardware computes it (``softfloat16.mma.gemm``, which ``split_k`` and ``promote_every`` go to),
    not the exact dequantised sums above; nvfp4's per-tensor factor is applied after it, the same one
    FP32 multiplication. The element and scale formats and the block size must be the instruction's.
    """
    for name, q in (("a", a), ("b", b)):
        if not isinstance(q, MXTensor):
            raise TypeError(f"{name}: expected an MXTensor (from softfloat16.mx.quantize), got {type(q).__name__}")
        if len(q.shape) != 2:
            raise ValueError(f"{name}: expected a 2-D operand, got shape {q.shape}")
    if a.axis != 1:
        raise ValueError(f"a: must be quantised along its last axis (K of (M, K)), not axis {a.axis}")
    if b.axis != 0:
        raise ValueError(f"b: must be quantised along its first axis (K of (K, N)), not axis {b.axis}")
    if (a.fmt == "nvfp4") != (b.fmt == "nvfp4"):
        raise ValueError(f"b: format {b.fmt!r} cannot meet {a.fmt!r}: nvfp4 multiplies only nvfp4 (its scales "
                         "are E4M3 with a per-tensor FP32 scale; the MX formats' are E8M0)")
    if a.block_size != b.block_size:
        raise ValueError(f"b: block_size {b.block_size} differs from a's {a.block_size}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b: K = {b.shape[0]} (shape {b.shape}) differs from a's K = {a.shape[1]} (shape {a.shape})")
    if preset is not None:
        return _matmul_instruction(a, b, preset, split_k, promote_every)
    if split_k != 1 or promote_every is not None:
        raise ValueError("split_k, promote_every: only a GPU instruction (preset=...) takes them")
    sig, exp, cls, lowest = _element_table(a.element_format)
    b_sig, b_exp, b_cls, b_lowest = _element_table(b.element_format)
    scale_sig, scale_exp, scale_nan = _scale_table(a.scale_format)
    apply_tensor_scale = a.tensor_scale is not None
    factor = _fp32(_fp32_value(a.tensor_scale) * _fp32_value(b.tensor_scale)) if apply_tensor_scale else 0
    out = _matmul_on_host(a, b, factor if apply_tensor_scale else None)
    if out is not None:
        return out
    b_elements = np.ascontiguousarray(b.elements.T)
    b_scales = np.ascontiguousarray(b.scales.T)
    out = np.empty((a.shape[0], b.shape[1]), np.uint32)
    blockscale.block_scaled_matmul(
        sig[a.elements], exp[a.elements], cls[a.elements], b_sig[b_elements], b_exp[b_elements], b_cls[b_elements],
        scale_sig[a.scales], scale_exp[a.scales], scale_nan[a.scales],
        scale_sig[b_scales], scale_exp[b_scales], scale_nan[b_scales],
        a.block_size, lowest + b_lowest, apply_tensor_scale, factor, out)
    return out


@functools.cache
def _host_table(fmt: Format | str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pattern of an element or scale format: its value (binary64, exact), whether it is
    finite, and for nonzero values the exponent of its lowest significand bit and its bit length."""
    sig, exp, cls, lowest = _element_table(fmt)
    value = np.ldexp(sig.astype(np.float64), (exp + lowest).astype(np.int32))
    length = np.array([abs(int(g)).bit_length() for g in sig])
    return value, (cls == core.FINITE) | (cls == core.ZERO), exp + lowest, np.where(cls == core.FINITE, length, 0)


def _host_values(codes: np.ndarray, fmt: Format | str) -> tuple[np.ndarray, tuple[int, int], int] | None:
    """The values of ``codes`` (binary64), the (lowest, top) exponents of the nonzero ones (every one
    a multiple of 2**lowest, below 2**top; (0, 0) for none) and their longest significand; None
    where one is not finite."""
    value, finite, low, length = _host_table(fmt)
    present = np.bincount(np.asarray(codes, np.int64).ravel(), minlength=value.size)[:value.size] > 0
    if not finite[present].all():
        return None
    nonzero = present & (length > 0)
    if not nonzero.any():
        return value[codes], (0, 0), 0
    return value[codes], (int(low[nonzero].min()), int((low + length)[nonzero].max())), int(length[nonzero].max())


def _matmul_on_host(a: MXTensor, b: MXTensor, factor: int | None) -> np.ndarray | None:
    """The exact product (matmul's definition) on the host's binary64 and binary32 arithmetic
    (_kernels.hardware_blocks), where every element and scale is finite and every block's sum times
    its scales is exact in binary64; None elsewhere, or where the host's floating-point
    environment could not be set."""
    found = [_host_values(q.elements, q.element_format) for q in (a, b)]
    found += [_host_values(q.scales, q.scale_format) for q in (a, b)]
    if any(f is None for f in found):
        return None
    (av, a_range, _), (bv, b_range, _), (a_scales, _, a_bits), (b_scales, _, b_bits) = found
    if not hardware_blocks.exact_in_binary64(a_range, b_range, a.block_size, a_bits + b_bits):
        return None
    m, n, cols = a.shape[0], b.shape[1], hardware_blocks.COLS
    parallel = parallel_gemm(m, a.shape[1], n)
    av, a_scales = hardware.padded(av, hardware.ROWS, 1), hardware.padded(a_scales, hardware.ROWS, 1)
    panels, scale_panels = hardware.panels(bv, cols, parallel), hardware.panels(b_scales, cols, parallel)
    out = np.empty((av.shape[0], panels.shape[0] * cols), np.float32)
    scale = np.uint32(0 if factor is None else factor).view(np.float32)
    nan = np.array([blockscale.FP32_NAN_BITS], np.uint32).view(np.float32)
    kernel = hardware_blocks.make_block_scaled_gemm(parallel)
    if not kernel(av, a_scales, panels, scale_panels, a.block_size, scale, factor is not None, out, hardware.PROBE,
                  nan):
        return None
    return np.ascontiguousarray(out[:m, :n]).view(np.uint32)


def _matmul_instruction(a: MXTensor, b: MXTensor, name: str, split_k: int, promote_every: int | None) -> np.ndarray:
    """matmul on a block-scaled instruction of softfloat16.mma."""
    p = mma.preset(name)
    if p.scale is None:
        raise ValueError(f"preset: {p.name} is not block-scaled; multiply dequantised values with sf.mma.gemm")
    for arg, q, want in (("a", a, p.a), ("b", b, p.b)):
        got = getattr(q.element_format, "name", q.element_format)
        if got != want:
            raise ValueError(f"{arg}: {p.name} takes {want} elements, got {q.fmt} ({got})")
    scale = "e8m0" if p.scale == "e8m0" else "fp8_e4m3fn"
    if a.scale_format.name != scale:
        raise ValueError(f"a: {p.name} takes {p.scale} scales, got {a.scale_format.name} ({a.fmt})")
    if a.block_size != p.block:
        raise ValueError(f"a: {p.name} takes blocks of {p.block}, got block_size={a.block_size}")
    if a.shape[1] % p.k:
        raise ValueError(f"a: K = {a.shape[1]} is not a multiple of {p.name}'s k = {p.k}")
    out = mma.gemm(a.elements, b.elements, p, split_k=split_k, promote_every=promote_every, scale_a=a.scales,
                   scale_b=b.scales)
    if a.tensor_scale is not None:
        factor = _fp32(_fp32_value(a.tensor_scale) * _fp32_value(b.tensor_scale))
        out = np.asarray(binary("mul", "fp32", out, np.full(out.shape, factor, np.uint32)))
    return out.astype(np.uint32)
