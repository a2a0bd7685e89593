"""Which matrix-unit instruction a GEMM runs on: a GPU by name, or a tensor core of your own.

``softfloat16.linalg.matmul(..., order="tensorcore", tensor_core=...)`` and the torch mode take

- a GPU or architecture name (:data:`TENSOR_CORES`: ``"h100"``, ``"a100"``, ``"mi300x"``,
  ``"hopper"`` ...): the GEMM then runs on the instruction that GPU's GEMM kernels issue for the
  operand and accumulation formats (:func:`instruction`);
- an instruction preset of :mod:`softfloat16.mma` by its full name;
- a :class:`TensorCore`: the NVIDIA adder with parameters of your choice, for any input format.

All three are instructions of the one generic model (softfloat16.mma): no other tensor-core
arithmetic exists.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from softfloat16.formats import Format
from softfloat16.formats import format as parse_format
from softfloat16.mma import preset as mma_preset
from softfloat16.mma_presets import PRESETS, Model, Preset

__all__ = ["TENSOR_CORES", "TensorCore", "checked", "gemm_policy", "instruction", "resolve", "takes"]

#: GPU names (lower case) and the architecture of their matrix units.
TENSOR_CORES = {
    "v100": "volta", "t4": "turing", "a100": "ampere", "l40s": "ada", "h100": "hopper", "h200": "hopper",
    "b200": "blackwell", "rtx5090": "rtx_blackwell", "mi100": "cdna1", "mi250x": "cdna2", "mi300x": "cdna3",
}
_ARCHS = tuple(dict.fromkeys(p.arch for p in PRESETS.values()))
# The instruction families a GEMM library prefers, newest first: on Blackwell tcgen05.mma, on
# Hopper wgmma, elsewhere mma.sync or mfma.
_FAMILY_RANK = {"tcgen05": 0, "wgmma": 1, "mma": 2, "mfma": 3}


def _rank(p: Preset) -> tuple:
    """C of D's format (a GEMM feeds D back), the newest family, the largest k (fewest chained
    instructions), the largest tile, then the name."""
    return p.c != p.d, _FAMILY_RANK[p.instruction], -p.k, -p.m * p.n, p.name


def instruction(gpu: str, a_format: Format | str, b_format: Format | str | None = None,
                d_format: Format | str = "fp32") -> Preset:
    """The preset a GEMM kernel on ``gpu`` (a name of :data:`TENSOR_CORES` or an architecture)
    issues for A of ``a_format``, B of ``b_format`` (default: A's) and D of ``d_format``: the
    unscaled instruction of the newest family (tcgen05, wgmma, mma, mfma) with the largest k
    (the tile's m and n do not change the arithmetic).

    >>> instruction("h100", "fp16").name
    'hopper.wgmma.m64n256k16.f32.f16.f16'
    >>> instruction("v100", "fp16").name
    'volta.mma.m8n8k4.f32.f16.f16.f32'
    >>> instruction("a100", "bf16").name
    'ampere.mma.m16n8k16.f32.bf16.bf16.f32'
    """
    arch = TENSOR_CORES.get(gpu.lower(), gpu.lower()) if isinstance(gpu, str) else None
    if arch not in _ARCHS:
        raise ValueError(f"tensor_core: unknown GPU {gpu!r}; accepted: {', '.join(TENSOR_CORES)}, "
                         f"an architecture ({', '.join(_ARCHS)}), a preset name or a TensorCore")
    a, d = parse_format(a_format), parse_format(d_format)
    b = a if b_format is None else parse_format(b_format)
    return _instruction(gpu, arch, a.name, b.name, d.name)


@functools.cache
def _instruction(gpu: str, arch: str, a: str, b: str, d: str) -> Preset:
    """instruction()'s search over the catalogue, once per (GPU, formats)."""
    found = [p for p in PRESETS.values() if p.arch == arch and p.scale is None and (p.a, p.b, p.d) == (a, b, d)]
    if not found:
        taken = sorted({f"{p.a} x {p.b} -> {p.d}" for p in PRESETS.values() if p.arch == arch and p.scale is None})
        raise ValueError(f"tensor_core: {gpu} ({arch}) has no instruction for {a} x {b} -> {d}; "
                         f"it has {', '.join(taken)} (a TensorCore(B, F) takes any format)")
    return min(found, key=_rank)


def takes(gpu: str, a_format: Format | str, b_format: Format | str | None = None) -> bool:
    """Whether the matrix unit of ``gpu`` (a GPU or architecture name) has an instruction taking
    A of ``a_format`` and B of ``b_format`` (default: A's), into any D format.

    >>> takes("h100", "fp16"), takes("h100", "fp32"), takes("mi300x", "fp32")
    (True, False, True)
    """
    a = parse_format(a_format).name
    return _takes(TENSOR_CORES.get(gpu.lower(), gpu.lower()), a, a if b_format is None else parse_format(b_format).name)


@functools.cache
def _takes(arch: str, a: str, b: str) -> bool:
    return any(p.arch == arch and p.scale is None and (p.a, p.b) == (a, b) for p in PRESETS.values())


@dataclass(frozen=True)
class TensorCore:
    """An NVIDIA-style tensor-core adder with parameters of your choice, for any input format.

    Each step adds ``products_per_block`` (B) exact products and the FP32 accumulator as the
    hardware does (softfloat16.mma, ``adder="truncated"``): the terms are aligned on the largest sum
    of the factors' exponents (a zero term at ``zero_exponent``), truncated to ``fraction_bits`` (F)
    bits below that point, added exactly, and the sum is rounded toward zero into FP32 (overflow
    gives inf); steps run in k order, each one's result the next one's accumulator. K that is not a
    multiple of B is padded with zero products. ``TensorCore(16, 25)`` is Hopper's FP16/BF16
    instruction, bit for bit; vary B and F to ask what a wider or narrower adder would do (an FP8
    adder keeping 13 bits: ``TensorCore(32, 13)``).

    >>> TensorCore(16, 25).preset("fp16").model
    Model(adder='truncated', products_per_step=16, fraction_bits=25, zero_exponent=-133, output='rz_fp32', \
group=0, fraction_bits2=0)
    """

    products_per_block: int = 16
    fraction_bits: int = 25
    zero_exponent: int = -133  # Hopper's and Blackwell's, for FP32 output

    def __post_init__(self) -> None:
        for name, value, low, high in (("products_per_block", self.products_per_block, 1, 1024),
                                       ("fraction_bits", self.fraction_bits, 1, 50),
                                       ("zero_exponent", self.zero_exponent, -1000, 1000)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
                # The bounds keep a step's exact sum (B + 1 terms below 2**(F + 2)) inside an int64.
                raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")

    def preset(self, a_format: Format | str, b_format: Format | str | None = None) -> Preset:
        """This adder as an instruction preset (softfloat16.mma) taking A of ``a_format`` and B of
        ``b_format`` (default: A's), with FP32 C and D."""
        a = parse_format(a_format)
        b = a if b_format is None else parse_format(b_format)
        for arg, f in (("fmt", a), ("b_format", b)):
            if f.precision > 24 or f.storage_shift or not f.has_arithmetic:
                raise ValueError(f"{arg}: a TensorCore takes formats of at most 24 significand bits with "
                                 f"arithmetic, got {f.name}")
        block, bits = int(self.products_per_block), int(self.fraction_bits)
        model = Model("truncated", block, bits, int(self.zero_exponent), "rz_fp32")
        return Preset(f"tensorcore.b{block}.f{bits}.z{self.zero_exponent}.f32.{a.name}.{b.name}", "custom",
                      "tensorcore", 1, 1, block, a.name, b.name, "fp32", "fp32", model)


def _is_gpu(tensor_core) -> bool:
    """Whether ``tensor_core`` names a GPU or an architecture (in any case)."""
    return isinstance(tensor_core, str) and (tensor_core.lower() in TENSOR_CORES or tensor_core.lower() in _ARCHS)


def resolve(tensor_core: TensorCore | Preset | str, a_format: Format | str, b_format: Format | str | None = None,
            d_format: Format | str = "fp32") -> Preset:
    """The instruction preset of any ``tensor_core`` argument for these operand formats."""
    if isinstance(tensor_core, TensorCore):
        if parse_format(d_format).name != "fp32":
            raise ValueError(f"accumulate: a TensorCore accumulates in fp32, got {parse_format(d_format).name}")
        return tensor_core.preset(a_format, b_format)
    if isinstance(tensor_core, Preset):
        return tensor_core
    if _is_gpu(tensor_core):
        return instruction(tensor_core, a_format, b_format, d_format)
    if isinstance(tensor_core, str) and tensor_core in PRESETS:
        return PRESETS[tensor_core]
    try:
        return mma_preset(tensor_core)
    except ValueError as exc:
        raise ValueError(f"tensor_core: expected a TensorCore, a GPU ({', '.join(TENSOR_CORES)}), an architecture "
                         f"or a GPU instruction; {str(exc).removeprefix('preset: ')}") from None


def checked(tensor_core: TensorCore | Preset | str) -> TensorCore | Preset | str:
    """A ``tensor_core`` argument, checked before any GEMM runs: a TensorCore or a Preset as it is, a
    GPU or architecture name in lower case, a preset name; anything else gets one line."""
    if isinstance(tensor_core, (TensorCore, Preset)):
        return tensor_core
    if _is_gpu(tensor_core):
        return tensor_core.lower()
    if isinstance(tensor_core, str) and tensor_core in PRESETS:
        return tensor_core
    return resolve(tensor_core, "fp16")  # raises: names the closest presets


def gemm_policy(tensor_core: TensorCore | Preset | str, fmt: Format | str) -> dict:
    """linalg.matmul's ``order`` and ``tensor_core`` for a GPU GEMM of ``fmt`` operands: the matrix
    unit, except for operands a named GPU's matrix unit does not take (FP32 on NVIDIA GPUs), which
    a GPU sums in FP32 FMA loops (CUDA cores): the sequential order. An instruction preset or a
    TensorCore is always used.

    >>> gemm_policy("h100", "fp16"), gemm_policy("h100", "fp32")
    ({'order': 'tensorcore', 'tensor_core': 'h100'}, {'order': 'sequential'})
    """
    tensor_core = checked(tensor_core)
    if isinstance(tensor_core, str) and tensor_core not in PRESETS and not takes(tensor_core, fmt):
        return {"order": "sequential"}
    return {"order": "tensorcore", "tensor_core": tensor_core}
