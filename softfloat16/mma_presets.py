"""The catalogue of matrix-unit instructions: every NVIDIA mma / wgmma / tcgen05.mma and AMD mfma
shape and type the models cover, with the parameters of the one generic model (softfloat16.mma)
that reproduces each architecture's arithmetic. docs/hardware.md tabulates them.
"""
from __future__ import annotations

from dataclasses import dataclass

from softfloat16._kernels import mma as kernel

# PTX and AMD type names -> softfloat16 format names. TF32 (and AMD's xf32) operands are FP32
# registers whose low 13 bits the unit ignores; UE4M3 is E4M3 with the sign bit ignored.
PTX_TYPES = {"f64": "fp64", "f32": "fp32", "tf32": "tf32_fp32", "f16": "fp16", "bf16": "bf16", "e4m3": "fp8_e4m3fn",
             "e5m2": "fp8_e5m2", "e3m2": "fp6_e3m2", "e2m3": "fp6_e2m3", "e2m1": "fp4_e2m1",
             "ue8m0": "e8m0", "ue4m3": "ue4m3"}
AMD_TYPES = {"f64": "fp64", "f32": "fp32", "xf32": "tf32_fp32", "f16": "fp16", "bf16": "bf16", "fp8": "fp8_e4m3fnuz",
             "bf8": "fp8_e5m2fnuz"}
F8F6F4 = ("e5m2", "e4m3", "e3m2", "e2m3", "e2m1")
_BYTES = {"fp32": 4, "tf32_fp32": 4, "fp16": 2, "bf16": 2}  # every other input takes one byte


@dataclass(frozen=True)
class Model:
    """One parameterisation of the generic fused dot-product-add (softfloat16._kernels.mma).

    - ``adder``: how the terms are added (``"truncated"``, ``"groups"``, ``"c_apart"``,
      ``"c_apart_split"``, ``"exact"``, ``"ftz_pairs"``, ``"ftz_quads"``, ``"fma"``);
    - ``products_per_step``: products the adder takes at once (the instruction's k is a multiple);
    - ``fraction_bits``: bits kept below the alignment point (``fraction_bits2``: the AMD adders'
      second, rounded-down stage);
    - ``zero_exponent``: the exponent a zero term takes in the alignment maximum (None: no part);
    - ``output``: the sum's rounding into D: ``"rz_fp32"``, ``"rz_e8m13"`` (FP32 with 13 fraction
      bits), ``"rne_fp16"``, ``"rne_fp32"``, ``"rne_fp64"`` (the FP64 instructions: a chain of
      binary64 fused multiply-adds);
    - ``group``: products summed exactly before scaling (``"groups"`` only).
    """

    adder: str
    products_per_step: int
    fraction_bits: int = 0
    zero_exponent: int | None = None
    output: str = "rz_fp32"
    group: int = 0
    fraction_bits2: int = 0


_ADDERS = {"truncated": kernel.ADD_TRUNCATED, "groups": kernel.ADD_GROUPS, "c_apart": kernel.ADD_C_APART,
           "c_apart_split": kernel.ADD_C_APART_SPLIT, "exact": kernel.ADD_EXACT, "ftz_pairs": kernel.ADD_FTZ_PAIRS,
           "ftz_quads": kernel.ADD_FTZ_QUADS, "fma": kernel.ADD_FMA}
_OUTPUTS = {"rz_fp32": kernel.OUT_RZ_FP32, "rz_e8m13": kernel.OUT_RZ_E8M13, "rne_fp16": kernel.OUT_RNE_FP16,
            "rne_fp32": kernel.OUT_RNE_FP32, "rne_fp64": kernel.OUT_RNE_FP64}


def model_params(model: Model, block: int) -> tuple:
    """The kernel's parameter tuple for a model (block: scale block size, 0 if unscaled)."""
    zero = kernel.NO_EXPONENT if model.zero_exponent is None else model.zero_exponent
    return (_ADDERS[model.adder], model.products_per_step, model.fraction_bits, zero, _OUTPUTS[model.output],
            max(model.group, 1), max(block, 1), int(block > 0), model.fraction_bits2)


@dataclass(frozen=True)
class Preset:
    """One instruction: its name, shape, operand formats (softfloat16 names) and model."""

    name: str
    arch: str
    instruction: str
    m: int
    n: int
    k: int
    a: str
    b: str
    c: str
    d: str
    model: Model
    scale: str | None = None
    block: int = 0


# --- NVIDIA ---------------------------------------------------------------------------------------
# Per architecture: fraction bits the adder keeps, bytes of A one step takes, and the exponent of a
# zero term with FP16 and FP32 output.
_NV_ARCH = {
    "volta": (23, 8, -19, -131),
    "turing": (24, 16, -20, -132),
    "ampere": (24, 16, -20, -132),
    "ada": (24, 16, -20, -132),
    "hopper": (25, 32, -21, -133),
    "blackwell": (25, 32, -21, -133),
    "rtx_blackwell": (25, 32, -21, -133),
}
_SM70 = ["m8n8k4.f32.f16.f16.f32", "m8n8k4.f32.f16.f16.f16", "m8n8k4.f16.f16.f16.f16"]
_SM75 = ["m16n8k8.f32.f16.f16.f32", "m16n8k8.f16.f16.f16.f16"]
_SM80 = ["m16n8k8.f32.tf32.tf32.f32", "m16n8k4.f32.tf32.tf32.f32", "m16n8k16.f32.f16.f16.f32",
         "m16n8k16.f16.f16.f16.f16", "m16n8k16.f32.bf16.bf16.f32", "m16n8k8.f32.bf16.bf16.f32"]
_SM89 = [f"m16n8k{k}.{d}.{a}.{b}.{d}" for k in (32, 16) for d in ("f32", "f16") for a in ("e5m2", "e4m3")
         for b in ("e5m2", "e4m3")]
_SM120 = [f"m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}" for d in ("f32", "f16") for a in F8F6F4 for b in F8F6F4]
_NV_MMA = {
    "volta": _SM70,
    "turing": _SM75 + _SM70,
    "ampere": _SM80 + _SM75,
    "ada": _SM89 + _SM80 + _SM75,
    "hopper": _SM80 + _SM75,
    "blackwell": _SM80 + _SM75,
    "rtx_blackwell": _SM120 + _SM89 + _SM80 + _SM75,
}
_SM120_SCALED = ([f"m16n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.f32.ue8m0" for a in F8F6F4 for b in F8F6F4]
                 + ["m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
                    "m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0",
                    "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0",
                    "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"])
_N_WIDE = range(8, 257, 8)
_WGMMA = ([f"m64n{n}k8.f32.tf32.tf32" for n in _N_WIDE] + [f"m64n{n}k16.f32.f16.f16" for n in _N_WIDE]
          + [f"m64n{n}k16.f16.f16.f16" for n in _N_WIDE] + [f"m64n{n}k16.f32.bf16.bf16" for n in _N_WIDE]
          + [f"m64n{n}k32.{d}.{a}.{b}" for n in _N_WIDE for d in ("f32", "f16") for a in ("e5m2", "e4m3")
             for b in ("e5m2", "e4m3")])
_TCGEN05_MN = [(m, n) for m in (64, 128) for n in _N_WIDE]
_TCGEN05 = ([f"m{m}n{n}k8.kind::tf32.f32.tf32.tf32" for m, n in _TCGEN05_MN]
            + [f"m{m}n{n}k16.kind::f16.f32.{t}.{t}" for m, n in _TCGEN05_MN for t in ("f16", "bf16")]
            + [f"m{m}n{n}k16.kind::f16.f16.f16.f16" for m, n in _TCGEN05_MN]
            + [f"m{m}n{n}k32.kind::f8f6f4.{d}.{a}.{b}" for m, n in _TCGEN05_MN for d in ("f32", "f16")
               for a in F8F6F4 for b in F8F6F4])
_TCGEN05_SCALED = ([f"m128n{n}k32.kind::mxf8f6f4.block32.f32.{a}.{b}.ue8m0" for n in _N_WIDE for a in F8F6F4
                    for b in F8F6F4]
                   + [f"m128n{n}k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0" for n in _N_WIDE]
                   + [f"m128n{n}k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0" for n in _N_WIDE]
                   + [f"m128n{n}k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.{s}" for n in _N_WIDE
                      for s in ("ue8m0", "ue4m3")])


def _mnk(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def _nv_model(arch: str, k: int, a: str, d: str, fp8_e8m13: bool, volta_shape: bool = False) -> Model:
    """The truncating adder of an NVIDIA architecture for one unscaled shape and type."""
    frac_bits, step_bytes, zero16, zero32 = _NV_ARCH["volta" if volta_shape else arch]
    fp16_out = d == "f16"
    output = "rne_fp16" if fp16_out else "rz_fp32"
    if fp8_e8m13 and a in ("e4m3", "e5m2"):  # Ada's and Hopper's FP8 adders keep 13 bits
        frac_bits = 13
        output = "rne_fp16" if fp16_out else "rz_e8m13"
    step = min(k, step_bytes // _BYTES.get(PTX_TYPES[a], 1))
    return Model("truncated", step, frac_bits, zero16 if fp16_out else zero32, output)


def _scaled_model(k: int) -> Model:
    if k == 64:  # mxf4 / mxf4nvf4: exact sums of 16 products, 35 bits
        return Model("groups", 64, 35, -139, "rz_fp32", group=16)
    return Model("truncated", 32, 25, -133, "rz_fp32")


def _nvidia() -> list[Preset]:
    out = []
    for arch, shapes in _NV_MMA.items():
        for st in shapes:
            parts = st.split(".")
            if len(parts) == 6:
                shape, _, d, a, b, c = parts
            else:
                shape, d, a, b, c = parts
            m, n, k = _mnk(shape)
            volta_shape = arch == "turing" and st in _SM70  # Turing runs m8n8k4 as Volta does
            model = _nv_model(arch, k, a, d, arch == "ada", volta_shape)
            out.append(Preset(f"{arch}.mma.{st}", arch, "mma", m, n, k, PTX_TYPES[a], PTX_TYPES[b], PTX_TYPES[c],
                              PTX_TYPES[d], model))
    for st in _SM120_SCALED:
        shape, _, block, d, a, b, c, s = st.split(".")
        m, n, k = _mnk(shape)
        out.append(Preset(f"rtx_blackwell.mma.{st}", "rtx_blackwell", "mma", m, n, k, PTX_TYPES[a], PTX_TYPES[b],
                          PTX_TYPES[c], PTX_TYPES[d], _scaled_model(k), PTX_TYPES[s], int(block[5:])))
    for st in _WGMMA:
        shape, d, a, b = st.split(".")
        m, n, k = _mnk(shape)
        model = _nv_model("hopper", k, a, d, True)
        out.append(Preset(f"hopper.wgmma.{st}", "hopper", "wgmma", m, n, k, PTX_TYPES[a], PTX_TYPES[b],
                          PTX_TYPES[d], PTX_TYPES[d], model))
    for st in _TCGEN05:
        shape, _, d, a, b = st.split(".")
        m, n, k = _mnk(shape)
        model = _nv_model("blackwell", k, a, d, False)
        out.append(Preset(f"blackwell.tcgen05.{st}", "blackwell", "tcgen05", m, n, k, PTX_TYPES[a], PTX_TYPES[b],
                          PTX_TYPES[d], PTX_TYPES[d], model))
    for st in _TCGEN05_SCALED:
        shape, _, block, d, a, b, s = st.split(".")
        m, n, k = _mnk(shape)
        out.append(Preset(f"blackwell.tcgen05.{st}", "blackwell", "tcgen05", m, n, k, PTX_TYPES[a], PTX_TYPES[b],
                          PTX_TYPES[d], PTX_TYPES[d], _scaled_model(k), PTX_TYPES[s], int(block[5:])))
    return out


# --- AMD ------------------------------------------------------------------------------------------
_CDNA1 = ["f32_32x32x2f32", "f32_32x32x1f32", "f32_16x16x4f32", "f32_16x16x1f32", "f32_4x4x1f32",
          "f32_32x32x8f16", "f32_32x32x4f16", "f32_16x16x16f16", "f32_16x16x4f16", "f32_4x4x4f16",
          "f32_32x32x4bf16", "f32_32x32x2bf16", "f32_16x16x8bf16", "f32_16x16x2bf16", "f32_4x4x2bf16"]
_CDNA2 = ["f32_32x32x8bf16_1k", "f32_32x32x4bf16_1k", "f32_16x16x16bf16_1k", "f32_16x16x4bf16_1k",
          "f32_4x4x4bf16_1k"]
_CDNA3 = ["f32_32x32x1_2b_f32", "f32_16x16x1_4b_f32", "f32_4x4x1_16b_f32", "f32_32x32x2_f32", "f32_16x16x4_f32",
          "f32_16x16x8_xf32", "f32_32x32x4_xf32", "f32_32x32x4_2b_f16", "f32_16x16x4_4b_f16", "f32_4x4x4_16b_f16",
          "f32_32x32x8_f16", "f32_16x16x16_f16", "f32_32x32x4_2b_bf16", "f32_16x16x4_4b_bf16",
          "f32_4x4x4_16b_bf16", "f32_32x32x8_bf16", "f32_16x16x16_bf16"] + [
          f"f32_{s}_{a}_{b}" for s in ("16x16x32", "32x32x16") for a in ("bf8", "fp8") for b in ("bf8", "fp8")]
_AMD = {"cdna1": _CDNA1, "cdna2": _CDNA2 + _CDNA1, "cdna3": _CDNA3}


def _amd_types(suffix: str) -> tuple[str, str, str, str]:
    """(d type, shape, a type, b type) of an mfma suffix."""
    parts = suffix.split("_")
    d, shape = parts[0], parts[1]
    if len(parts) == 4 and parts[3] in ("fp8", "bf8"):
        return d, shape, parts[2], parts[3]
    if len(parts) >= 3 and parts[-1] != "1k":  # CDNA3: the type is the last field
        return d, shape, parts[-1], parts[-1]
    for t in ("bf16", "f16", "f32", "f64"):  # CDNA1/2: the type ends the shape field
        if shape.endswith(t):
            return d, shape[: -len(t)], t, t
    raise AssertionError(suffix)


def _amd_model(arch: str, suffix: str, a: str, k: int) -> Model:
    if a == "f32":
        return Model("fma", k)
    if a in ("fp8", "bf8"):
        return Model("c_apart_split", min(k, 16), 24, None, "rne_fp32", fraction_bits2=31)
    if arch == "cdna1":
        return Model("exact", min(k, 4 if a == "f16" else 2), output="rne_fp32")
    if arch == "cdna2":
        return Model("ftz_pairs" if a == "bf16" and not suffix.endswith("_1k") else "ftz_quads", k,
                     output="rne_fp32")
    return Model("c_apart", min(k, 4 if a == "xf32" else 8), 24, None, "rne_fp32", fraction_bits2=31)


def _amd() -> list[Preset]:
    out = []
    for arch, suffixes in _AMD.items():
        for suffix in suffixes:
            d, shape, a, b = _amd_types(suffix)
            m, n, k = (int(x) for x in shape.split("x"))
            out.append(Preset(f"{arch}.mfma.{suffix}", arch, "mfma", m, n, k, AMD_TYPES[a], AMD_TYPES[b],
                              AMD_TYPES[d], AMD_TYPES[d], _amd_model(arch, suffix, a, k)))
    return out


# --- FP64 (a chain of binary64 fused multiply-adds; after the others, so that adding them kept the
# catalogue's order) --------------------------------------------------------------------------------
_NV_FP64 = {arch: ["m8n8k4.f64.f64.f64.f64"] for arch in ("ampere", "ada", "blackwell", "rtx_blackwell")}
_NV_FP64["hopper"] = ["m16n8k16.f64.f64.f64.f64", "m16n8k8.f64.f64.f64.f64", "m16n8k4.f64.f64.f64.f64",
                      "m8n8k4.f64.f64.f64.f64"]
_AMD_FP64 = {"cdna2": ["f64_16x16x4f64", "f64_4x4x4f64"], "cdna3": ["f64_16x16x4_f64", "f64_4x4x4_4b_f64"]}


def _fp64_model(k: int) -> Model:
    """The FP64 instructions' model: k binary64 FMAs in order, c = a[t] * b[t] + c."""
    return Model("fma", k, output="rne_fp64")


def _fp64() -> list[Preset]:
    out = []
    for arch, shapes in _NV_FP64.items():
        for st in shapes:
            m, n, k = _mnk(st.split(".")[0])
            out.append(Preset(f"{arch}.mma.{st}", arch, "mma", m, n, k, "fp64", "fp64", "fp64", "fp64",
                              _fp64_model(k)))
    for arch, suffixes in _AMD_FP64.items():
        for suffix in suffixes:
            _, shape, _, _ = _amd_types(suffix)
            m, n, k = (int(x) for x in shape.split("x"))
            out.append(Preset(f"{arch}.mfma.{suffix}", arch, "mfma", m, n, k, "fp64", "fp64", "fp64", "fp64",
                              _fp64_model(k)))
    return out


PRESETS: dict[str, Preset] = {p.name: p for p in _nvidia() + _amd() + _fp64()}
