"""Checking softfloat16.mma against MMA-Sim (the ``mmasim`` package, an optional reference): random
operands that reach every rule of the models, the same GEMM through both, and a count of the
elements that differ. Used by tests/test_mma.py (a slice) and ``python -m softfloat16 verify-mma``
(at least 10**5 dot products per preset).
"""
from __future__ import annotations

import numpy as np

from softfloat16._kernels import mma as kernel
from softfloat16.mma import FP64, _decoded, _format, mma, preset
from softfloat16.mma_presets import Preset

# What each case stresses: a kind of operand values (see random_operands) and of C.
KINDS = ("near_one", "wide", "cancel", "tiny", "specials", "overflow", "mixed")
# Presets whose NaN comes out of the host's float arithmetic in MMA-Sim (its FMA, FTZ and exact
# adders): there any NaN matches any NaN; elsewhere MMA-Sim writes one pattern and so do we.
HOST_NAN_ADDERS = ("exact", "ftz_pairs", "ftz_quads", "fma")
_ARCH_NAMES = {"volta": "Volta", "turing": "Turing", "ampere": "Ampere", "ada": "Ada Lovelace",
               "hopper": "Hopper", "blackwell": "Blackwell", "rtx_blackwell": "RTX Blackwell",
               "cdna1": "CDNA1", "cdna2": "CDNA2", "cdna3": "CDNA3"}


def mmasim_missing() -> str | None:
    """None if MMA-Sim imports (and builds its FMA extension); else the one-line reason it does not."""
    try:
        import mmasim.amd  # noqa: F401
        import mmasim.nv_ptx  # noqa: F401
    except Exception as exc:  # ImportError, or the C++ build failing (no compiler, no ninja)
        return f"mmasim unavailable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _codes(name: str, rng: np.random.Generator, shape, kind: str) -> np.ndarray:
    """Random patterns of a format, drawn for one kind of case."""
    fmt = _format(name)
    shift = fmt.storage_shift
    width = int(fmt.signed) + fmt.exponent_bits + fmt.fraction_bits  # the pattern, above any ignored bits
    sign = rng.integers(0, 2, shape, dtype=np.int64) << (width - 1) if fmt.signed else 0
    fbits, bias = fmt.fraction_bits, fmt.bias
    top_field = (1 << fmt.exponent_bits) - 1
    frac = rng.integers(0, 1 << fbits, shape, dtype=np.int64) if fbits else 0
    any_code = rng.integers(0, 1 << width, shape, dtype=np.uint64).view(np.int64)  # FP64: the sign in int64's
    if kind == "near_one":
        field = np.clip(bias + rng.integers(-3, 4, shape), 1, max(top_field - 1, 1))
        codes = sign | (field << fbits) | frac
    elif kind == "tiny":
        field = rng.integers(0, min(3, top_field + 1), shape)
        codes = np.where(rng.random(shape) < 0.3, sign, sign | (field << fbits) | frac)
    elif kind == "overflow":
        field = np.clip(top_field - rng.integers(0, 3, shape), 0, top_field)
        codes = sign | (field << fbits) | frac
    elif kind == "cancel":  # few distinct magnitudes: products cancel exactly
        field = np.clip(bias + rng.integers(-1, 2, shape), 1, max(top_field - 1, 1))
        codes = sign | (field << fbits) | (frac & 1 if fbits else 0)
    elif kind == "mixed":
        pick = rng.integers(0, 4, shape)
        codes = np.choose(pick, [_codes(name, rng, shape, k) >> shift for k in ("near_one", "tiny", "wide", "cancel")])
    else:  # "wide" and "specials": every pattern (the specials' C differs)
        codes = any_code
    codes = codes.astype(np.int64) << shift
    if shift:  # bits the unit ignores (TF32 in FP32 registers): random, as a user's FP32 data has them
        codes |= rng.integers(0, 1 << shift, shape, dtype=np.int64)
    return codes if kind in ("specials", "mixed") else _without_specials(codes, name)


def _without_specials(codes: np.ndarray, name: str) -> np.ndarray:
    """Codes with their NaN and infinity patterns replaced by +0 (the "specials" cases draw them)."""
    if name == FP64.name:
        special = (codes >> 52) & 0x7FF == 0x7FF
    else:
        cls = _decoded(codes, name)[0]
        special = (cls == kernel.INF) | (cls == kernel.NAN)
    return np.where(special, 0, codes)


def random_operands(p: Preset, rows: int, cols: int, k: int, kind: str, seed: int) -> tuple:
    """(a, b, c, scale_a, scale_b) bit arrays for one case of a preset."""
    rng = np.random.default_rng(seed)
    a = _codes(p.a, rng, (rows, k), kind)
    b = _codes(p.b, rng, (k, cols), kind)
    c_kind = {"specials": "specials", "overflow": "overflow", "tiny": "tiny", "mixed": "wide"}.get(kind, "near_one")
    c = _codes(p.c, rng, (rows, cols), c_kind)
    c[rng.random((rows, cols)) < 0.25] = 0
    if p.scale is None:
        return a, b, c, None, None
    s_kind = "specials" if kind == "specials" else "near_one"
    scale_a = _codes(p.scale, rng, (rows, k // p.block), s_kind)
    scale_b = _codes(p.scale, rng, (k // p.block, cols), s_kind)
    if kind in ("wide", "tiny"):  # spread the scales too: the zero-term exponent decides the alignment
        spread = rng.integers(-30, 31, scale_a.shape)
        scale_a = _spread_scale(p.scale, scale_a, spread)
    return a, b, c, scale_a, scale_b


def _spread_scale(name: str, codes: np.ndarray, spread: np.ndarray) -> np.ndarray:
    if name == "e8m0":
        return np.clip(codes + spread, 0, 254)
    return np.clip((codes & 0x7F) + spread, 0, 0x7E)  # UE4M3: finite, nonnegative


# --- running MMA-Sim ------------------------------------------------------------------------------
_TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32_fp32": "float32",
                 "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "fp8_e4m3fnuz": "float8_e4m3fnuz",
                 "fp8_e5m2fnuz": "float8_e5m2fnuz", "e8m0": "float8_e8m0fnu", "ue4m3": "float8_e4m3fn",
                 "fp64": "float64"}
_SIGNED_VIEW = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _tensor(bits: np.ndarray, name: str, packed_fp4: bool):
    """The torch tensor MMA-Sim takes for patterns of a format: a float dtype viewed from the bits,
    or bytes for FP6 (bits 5:0) and FP4 (bits 5:2; two per byte, high nibble first, in the mxf4 kinds)."""
    import torch
    if name in ("fp6_e3m2", "fp6_e2m3", "fp4_e2m1"):
        if packed_fp4:
            codes = bits.reshape(*bits.shape[:-1], -1, 2)
            return torch.from_numpy(((codes[..., 0] << 4) | codes[..., 1]).astype(np.uint8))
        return torch.from_numpy((bits << (2 if name == "fp4_e2m1" else 0)).astype(np.uint8))
    dtype = getattr(torch, _TORCH_DTYPES[name])
    size = torch.empty((), dtype=dtype).element_size()
    signed = bits.astype(np.int64)
    if size < 8:  # FP64's patterns are int64s already
        signed = np.where(signed >> (8 * size - 1), signed - (1 << (8 * size)), signed)
    signed = signed.astype(_SIGNED_VIEW[size])
    return torch.from_numpy(signed).view(dtype)


def _operation(p: Preset):
    import mmasim.amd
    import mmasim.nv_ptx
    arch = _ARCH_NAMES[p.arch]
    shape_and_type = p.name.split(".", 2)[2]
    if p.instruction == "mfma":
        return mmasim.amd.MFMA(arch, shape_and_type)
    if p.instruction == "wgmma":
        return mmasim.nv_ptx.WGMMA(arch, shape_and_type)
    if p.instruction == "tcgen05":
        cls = mmasim.nv_ptx.TCGen05MMABlockScale if p.scale else mmasim.nv_ptx.TCGen05MMA
        return cls(arch, shape_and_type)
    cls = mmasim.nv_ptx.MMABlockScale if p.scale else mmasim.nv_ptx.MMA
    return cls(arch, shape_and_type)


def mmasim_gemm(p: Preset, a, b, c, scale_a=None, scale_b=None) -> np.ndarray:
    """D of MMA-Sim for every (i, j): its batched dot products ``dpa``, one instruction's k at a
    time, each D fed back as C (a kernel's K loop); returns D's bits."""
    import torch
    op = _operation(p)
    rows, k = a.shape
    cols = b.shape[1]
    a_vec = np.repeat(a[:, None, :], cols, axis=1).reshape(rows * cols, k)
    b_vec = np.repeat(b.T[None, :, :], rows, axis=0).reshape(rows * cols, k)
    acc = _tensor(c.reshape(-1), p.c, False)
    packed = p.scale is not None and p.k == 64
    if p.scale is not None:
        sa_vec = np.repeat(scale_a[:, None, :], cols, axis=1).reshape(rows * cols, -1)
        sb_vec = np.repeat(scale_b.T[None, :, :], rows, axis=0).reshape(rows * cols, -1)
    blocks = p.k // p.block if p.scale is not None else 0
    with torch.no_grad():
        for t in range(0, k, p.k):
            a_t = _tensor(a_vec[:, t:t + p.k], p.a, packed)
            b_t = _tensor(b_vec[:, t:t + p.k], p.b, packed)
            if p.scale is None:
                acc = op.dpa(a_t, b_t, acc)
            else:
                s = t // p.block
                acc = op.dpa(a_t, b_t, acc, _tensor(sa_vec[:, s:s + blocks], p.scale, False),
                             _tensor(sb_vec[:, s:s + blocks], p.scale, False))
    width = acc.element_size()
    bits = acc.contiguous().view(getattr(torch, _SIGNED_VIEW[width])).numpy().astype(np.int64)
    if width < 8:
        bits &= (1 << (8 * width)) - 1
    return bits.reshape(rows, cols)  # FP64: the uint64 patterns in int64s


def compare(name: str, rows: int, cols: int, k: int, kind: str, seed: int) -> tuple[int, int, list]:
    """(cases, mismatches, up to 5 examples) of one random GEMM of a preset against MMA-Sim."""
    p = preset(name)
    a, b, c, sa, sb = random_operands(p, rows, cols, k, kind, seed)
    ours = mma(a, b, c, p, scale_a=sa, scale_b=sb).astype(np.int64)
    theirs = mmasim_gemm(p, a, b, c, sa, sb)
    differ = ours != theirs
    if p.model.adder in HOST_NAN_ADDERS:
        d = _format(p.d)
        nan_ours = np.isnan(ours.astype(d.dtype).view(d.float_dtype_name))
        nan_theirs = np.isnan(theirs.astype(d.dtype).view(d.float_dtype_name))
        differ &= ~(nan_ours & nan_theirs)
    where = np.argwhere(differ)[:5]
    examples = [dict(i=int(i), j=int(j), ours=_hex(ours[i, j]), mmasim=_hex(theirs[i, j]), a=[_hex(x) for x in a[i]],
                     b=[_hex(x) for x in b[:, j]], c=_hex(c[i, j]))
                for i, j in where]
    return differ.size, int(differ.sum()), examples


def _hex(x) -> str:
    """A pattern in hex (FP64's, held in an int64, as its uint64)."""
    return hex(int(x) % (1 << 64))
