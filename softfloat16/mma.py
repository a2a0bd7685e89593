"""GPU matrix units, bit for bit: NVIDIA tensor cores (mma, wgmma, tcgen05.mma) and AMD matrix
cores (mfma) of every generation from Volta and CDNA1 to Blackwell and CDNA3.

Every instruction is one parameterisation (:class:`~softfloat16.mma_presets.Model`) of a fused
dot-product-add: the products are exact; the hardware aligns them on the largest sum of the
factors' exponents (a subnormal factor counts at its format's minimum exponent, a zero term at a
fixed exponent), keeps a fixed number of bits below it, adds, and rounds once into the output; an
instruction with a large k runs as several such steps, each one's result fed to the next as the
accumulator. The FP64 instructions are chains of binary64 fused multiply-adds (uint64 patterns in
and out). docs/hardware.md has the table of architectures, formats and rules.

>>> import numpy as np, softfloat16 as sf
>>> a = np.array([[0x3C00, 0x3C00, 0x3C00, 0x1400]], np.uint16)   # fp16: 1, 1, 1, 2**-10
>>> b = np.array([[0x3C00], [0x3C00], [0x3C00], [0x3C00]], np.uint16)
>>> hex(sf.mma.mma(a, b, None, "volta.mma.m8n8k4.f32.f16.f16.f32")[0, 0])     # 3 + 2**-10
'0x40401000'
>>> hex(sf.mma.mma(a, b, np.array([[0x5C000000]], np.uint32), "volta.mma.m8n8k4.f32.f16.f16.f32")[0, 0])
'0x5c000000'
"""
from __future__ import annotations

import difflib

import numpy as np

from softfloat16._kernels import mma as kernel
from softfloat16._kernels import hardware, mma_fma64, mma_lanes_amd, mma_lanes_operands
from softfloat16.formats import FORMATS, Format, as_bits
from softfloat16.formats import format as parse_format
from softfloat16.mma_presets import PRESETS, Model, Preset, model_params
from softfloat16.ops import binary, convert
from softfloat16.threads import numba_threads, parallel_gemm

__all__ = ["PRESETS", "Model", "Preset", "gemm", "mma", "preset", "presets"]

# UE4M3 block scales: E4M3 patterns whose sign bit the unit ignores.
_UE4M3 = "ue4m3"
# IEEE 754 binary64, the FP64 instructions' one format: a layout for reading and writing patterns
# (uint64; float64 arrays are read as bits); the arithmetic is _kernels.mma_fma64's, not the core's.
FP64 = Format("fp64", 11, 52, np.uint64, "float64")


def presets(arch: str | None = None) -> tuple[str, ...]:
    """Every preset name (of one architecture: ``"volta"`` ... ``"rtx_blackwell"``, ``"cdna1"`` ...)."""
    if arch is None:
        return tuple(PRESETS)
    names = tuple(name for name, p in PRESETS.items() if p.arch == arch)
    if not names:
        raise ValueError(f"arch: expected one of {', '.join(sorted({p.arch for p in PRESETS.values()}))}, "
                         f"got {arch!r}")
    return names


def preset(name: str | Preset) -> Preset:
    """The :class:`Preset` of a name; an unknown name gets one line with the closest valid ones."""
    if isinstance(name, Preset):
        return name
    found = PRESETS.get(name) if isinstance(name, str) else None
    if found is None:
        close = difflib.get_close_matches(str(name), PRESETS, n=5, cutoff=0.0)
        raise ValueError(f"preset: unknown {name!r}; closest: {', '.join(close)} "
                         f"(softfloat16.mma.presets() lists all {len(PRESETS)})")
    return found


def _layout(name: str) -> tuple[int, int, int, int, int]:
    """The kernel's (ebits, fbits, encoding, shift, mask) of an operand format."""
    fmt = _format(name)
    mask = 0x7F if name == _UE4M3 else (1 << fmt.width) - 1
    return fmt.exponent_bits, fmt.fraction_bits, fmt.encoding_code, fmt.storage_shift, mask


def _format(name: str) -> Format:
    if name == FP64.name:
        return FP64
    return parse_format("fp8_e4m3fn" if name == _UE4M3 else name)  # P3109 formats too


# Where the unit ignores bits, any pattern of the register's width is read: TF32 from FP32
# registers (the low 13 bits ignored), UE4M3 from bytes (the sign bit ignored).
_REGISTER = {"tf32_fp32": "fp32", _UE4M3: "fp8_e4m3fn"}


def _patterns(x, name: str, arg: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A 2-D array of patterns of format ``name`` (sf.as_bits reads them: integers, or floats of the
    format's own dtype) as uint16 (patterns of at most 16 bits) or int64 (FP64: the sign in
    int64's); anything else gets one line naming the argument."""
    arr = as_bits(x, _format(_REGISTER.get(name, name)), arg)
    if arr.ndim != 2:
        raise ValueError(f"{arg}: expected a 2-D array, got shape {arr.shape}")
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{arg}: expected shape {shape}, got {arr.shape}")
    if arr.dtype == np.uint64:
        return arr.view(np.int64)
    return arr if arr.dtype == np.uint16 else arr.astype(np.uint16 if arr.itemsize == 1 else np.int64)


def _bits(x, name: str, arg: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """:func:`_patterns` as int64."""
    arr = _patterns(x, name, arg, shape)
    return arr if arr.dtype == np.int64 else arr.astype(np.int64)


def _decoded(bits: np.ndarray, name: str) -> tuple:
    flat = np.ascontiguousarray(bits).ravel()
    out = (np.empty(flat.size, np.int8), np.empty(flat.size, np.int8), np.empty(flat.size, np.int64),
           np.empty(flat.size, np.int64), np.empty(flat.size, np.int64))
    kernel.decode(flat, _layout(name), *out)
    return tuple(x.reshape(bits.shape) for x in out)


def _check_types(p: Preset, a_format, b_format) -> None:
    for arg, given, want in (("a_format", a_format, p.a), ("b_format", b_format, p.b)):
        if given is None or (want == FP64.name and given in (FP64, FP64.name)):
            continue
        if want == FP64.name or _format(want) is not parse_format(given):
            raise ValueError(f"{arg}: {p.name} takes {want} operands, got {given!r}")


def mma(a, b, c, preset_name: str | Preset, *, scale_a=None, scale_b=None, a_format=None,
        b_format=None) -> np.ndarray:
    """D = A @ B + C as the instruction computes it, chained over K as a kernel does.

    - ``a`` (M, K), ``b`` (K, N): bit patterns of the preset's input formats, one value per element
      (FP4 and FP6 unpacked, in the low bits); TF32 operands are FP32 patterns whose low 13 bits are
      ignored, as the hardware ignores them. Float arrays of the format's own dtype are read as bits.
      FP64 presets take uint64 or int64 arrays of binary64 patterns, or float64 arrays.
    - ``c`` (M, N): bits of the preset's C format, or None for +0.
    - ``scale_a`` (M, K // block), ``scale_b`` (K // block, N): the scale patterns of a
      block-scaled preset (E8M0, or UE4M3: E4M3 with the sign bit ignored).
    - ``a_format`` / ``b_format``: optional, checked against what the instruction takes.

    Any M and N. K is chained in the instruction's k: each instruction's D is the next one's C.
    K that is not a multiple of k is padded with zero products, as a kernel pads its last tile
    (block-scaled presets need whole instructions). Returns D's bits (uint32 for FP32, uint16 for
    FP16, uint64 for FP64).
    """
    p = preset(preset_name)
    _check_types(p, a_format, b_format)
    a = _patterns(a, p.a, "a")  # not widened: the lanes read them once (a copy in int64 costs more)
    b = _patterns(b, p.b, "b")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: shapes {a.shape} and {b.shape} do not chain (a's columns must equal b's rows)")
    rows, k, cols = a.shape[0], a.shape[1], b.shape[1]
    if k == 0:
        raise ValueError("a, b: K is 0: an instruction needs at least one product")
    scaled = p.scale is not None
    if scaled != (scale_a is not None) or scaled != (scale_b is not None):
        need = f"scale_a and scale_b ({p.scale} patterns, one per {p.block} elements of K)" if scaled else "no scales"
        raise ValueError(f"scale_a, scale_b: {p.name} takes {need}")
    if k % p.k:
        if scaled:
            raise ValueError(f"a, b: K = {k} is not a multiple of {p.name}'s k = {p.k} (block-scaled presets "
                             "take whole instructions)")
        pad = p.k - k % p.k
        a = np.concatenate([a, np.zeros((rows, pad), a.dtype)], axis=1)
        b = np.concatenate([b, np.zeros((pad, cols), b.dtype)], axis=0)
        k += pad
    c_bits = np.zeros((rows, cols), np.int64) if c is None else _bits(c, p.c, "c", (rows, cols))
    numba_threads()  # sf.set_num_threads' count
    if p.d == FP64.name or p.model.adder == "fma":  # one chain of FMAs over K (padding adds +0 products)
        host = _host_fma_chain(a, b, c_bits if c is not None else None, p.d == FP64.name)
        if host is not None:
            return host
    if p.d == FP64.name:  # the integer FMA: the host's floating-point environment is not the default
        out = np.empty((rows, cols), np.int64)
        mma_fma64.fma64_gemm(np.ascontiguousarray(a), np.ascontiguousarray(b.T), c_bits, out)
        return out.view(np.uint64)
    if scaled:
        sa = _decoded(_bits(scale_a, p.scale, "scale_a", (rows, k // p.block)), p.scale)
        sb = _decoded(_bits(scale_b, p.scale, "scale_b", (k // p.block, cols)).T, p.scale)
    else:
        sa = sb = _decoded(np.zeros((1, 1), np.int64), p.a)
    out = np.empty((rows, cols), np.int64)
    # Every adder runs in SIMD lanes where they are exact (the same bits), else in the scalar kernel.
    params = model_params(p.model, p.block)

    def decoded():  # (A, B.T) decoded: what the scalar kernel reads
        return _decoded(a.astype(np.int64, copy=False), p.a), _decoded(np.ascontiguousarray(b.T, np.int64), p.b)

    if params[0] in mma_lanes_amd.ADDERS:
        mma_lanes_amd.mma_gemm(*decoded(), c_bits, c is not None, _layout(p.c), _layout(p.d), sa, sb, out, params)
    else:  # the patterns are read once into lanes; decoded only where a scalar step may run
        mma_lanes_operands.gemm(np.ascontiguousarray(a), np.ascontiguousarray(b), _layout(p.a), _layout(p.b), decoded,
                                c_bits, c is not None, _layout(p.c), _layout(p.d), sa, sb, out, params)
    return out.astype(FORMATS[p.d].dtype)


def _host_fma_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, fp64: bool) -> np.ndarray | None:
    """An FMA-chain instruction (FP32: AMD's f32 mfma; FP64) on the host's FMA, which is IEEE 754's
    (softfloat16._kernels.hardware): D's bits with every NaN the instruction's one pattern, or None
    where the host's floating-point environment is not the default (the exact kernels then run)."""
    if fp64:
        as_float, nan = (lambda x: np.ascontiguousarray(x).view(np.float64)), int(mma_fma64.NAN64)
    else:
        as_float, nan = (lambda x: x.astype(np.uint32).view(np.float32)), 0x7FFFFFFF
    parallel = parallel_gemm(a.shape[0], a.shape[1], b.shape[1])
    d = hardware.gemm(as_float(a), as_float(b), None if c is None else as_float(c), parallel=parallel, nan=nan)
    return None if d is None else np.ascontiguousarray(d).view(np.uint64 if fp64 else np.uint32)


def _positive(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def gemm(a, b, preset_name: str | Preset, c=None, *, split_k: int = 1, promote_every: int | None = None,
         scale_a=None, scale_b=None) -> np.ndarray:
    """A GEMM kernel's D = A @ B (+ C) on the instruction, with the two options kernels add on top.

    - ``promote_every=N`` (a multiple of the instruction's k): the tensor-core accumulator starts
      from +0 for every N elements of K and each such partial D is added into an FP32 register
      outside the tensor core (one FP32 addition, round to nearest even), in k order: the
      promotion of DeepSeek-V3's FP8 GEMMs (N = 128).
    - ``split_k=S``: K is cut into S contiguous parts of equal length (whole instructions; the
      last may be shorter), each computed alone from C = +0; the S partials are then added in FP32
      in part order, ``((p_0 + p_1) + p_2) + ...`` (round to nearest even), then C, as a split-K
      kernel's reduction does.

    Without either option this is :func:`mma`. With one, the result is FP32 bits (an FP16 partial
    is exact in FP32) and C, given, is added last in FP32; the FP64 presets add in FP64 instead and
    return FP64 bits.
    """
    p = preset(preset_name)
    split_k = _positive(split_k, "split_k")
    if promote_every is not None:
        promote_every = _positive(promote_every, "promote_every")
        if promote_every % p.k or (p.scale is not None and promote_every % p.block):
            raise ValueError(f"promote_every: {promote_every} is not a multiple of {p.name}'s k = {p.k}")
    if split_k == 1 and promote_every is None:
        return mma(a, b, c, p, scale_a=scale_a, scale_b=scale_b)
    a = _bits(a, p.a, "a")
    b = _bits(b, p.b, "b")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: shapes {a.shape} and {b.shape} do not chain (a's columns must equal b's rows)")
    k = a.shape[1]
    instructions = -(-k // p.k)
    if split_k > instructions:
        raise ValueError(f"split_k: {split_k} parts of K = {k} leave some without an instruction "
                         f"(at most {instructions})")
    part = -(-instructions // split_k) * p.k
    total = None
    for start in range(0, k, part):
        partial = None
        step = promote_every or part
        for lo in range(start, min(start + part, k), step):
            hi = min(lo + step, start + part, k)
            sa = None if scale_a is None else np.asarray(scale_a)[:, lo // p.block: -(-hi // p.block)]
            sb = None if scale_b is None else np.asarray(scale_b)[lo // p.block: -(-hi // p.block)]
            d = mma(a[:, lo:hi], b[lo:hi], None, p, scale_a=sa, scale_b=sb)
            d = np.asarray(convert(d, src=p.d, dst="fp32")) if p.d not in ("fp32", FP64.name) else d
            partial = d if partial is None else _add(p, partial, d)
        total = partial if total is None else _add(p, total, partial)
    if c is not None:
        c = _bits(c, p.c, "c", total.shape)
        if p.c == FP64.name:
            return _add(p, total, c.view(np.uint64))
        c = np.asarray(convert(c.astype(FORMATS[p.c].dtype), src=p.c, dst="fp32")) if p.c != "fp32" else c
        total = _add(p, total, c.astype(np.uint32))
    return total.astype(np.uint32) if p.d != FP64.name else total


def _add(p: Preset, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y rounded to nearest even: in FP64 (binary64 bits) for the FP64 presets, else in FP32."""
    if p.d != FP64.name:
        return np.asarray(binary("add", "fp32", x, y))
    out = np.empty(x.size, np.int64)
    mma_fma64.add64(np.ascontiguousarray(x).view(np.int64).ravel(), np.ascontiguousarray(y).view(np.int64).ravel(),
                    out)
    return out.view(np.uint64).reshape(x.shape)
