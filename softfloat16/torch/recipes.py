"""Low-precision GEMM recipes of the torch mode: ``emulate(gemm="mxfp8", tensor_core="b200")``.

Under a recipe every GEMM of the mode (mm, addmm, bmm, baddbmm, mv, dot, the GEMMs of convolutions
and of attention: whatever reaches :func:`softfloat16.torch.linear.accumulate_products`) quantises
its two operands as the recipe prescribes and multiplies them on the GPU instruction that the
``tensor_core`` runs for their formats (softfloat16.mma); the FP32 result then goes through the
op's epilogue (alpha, bias) and its one rounding as without a recipe. docs/torch.md, "Low-precision
GEMM recipes", states each recipe and the library default it matches.

- ``mxfp8``, ``mxfp6``, ``mxfp4``: OCP MX (softfloat16.mx): blocks of 32 along K with an E8M0 scale
  (``scale_rule`` "floor" or "rceil"); elements E4M3, E2M3, E2M1 (gradients: ``grad_format``).
- ``nvfp4``: E2M1 in blocks of 16 along K with an E4M3 scale, and a per-tensor FP32 scale
  applied after the MMA (softfloat16.mx's nvfp4).
- ``fp8_tensorwise``: one FP32 scale per operand, fp8_max / amax; ``fp8_rowwise``: one per row of
  A and per column of B, rounded down to a power of two. The unscaled FP8 instruction runs; the
  FP32 result is multiplied by the product of the two inverse scales.

In autograd's backward pass one operand of each GEMM is a gradient (quantised in ``grad_format``,
rounded in ``grad_rounding``): :class:`OpRoles` tells which.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import torch

import softfloat16 as sf
from softfloat16 import mma, mx, tensor_cores
from softfloat16.formats import FORMATS
from softfloat16.mma_presets import PRESETS, Preset
from softfloat16.tensor_cores import TensorCore

from .registry import EmulationError
from .tensors import DTYPE_FORMATS, bits

__all__ = ["RECIPES", "OpRoles", "Recipe", "products", "recipe"]

FP32 = sf.fp32
_MX = {"fp8_e4m3fn": "mxfp8_e4m3", "fp8_e5m2": "mxfp8_e5m2", "fp6_e2m3": "mxfp6_e2m3", "fp6_e3m2": "mxfp6_e3m2",
       "fp4_e2m1": "mxfp4_e2m1"}
# The operand dtypes a recipe quantises (read exactly by the quantisers).
_TAKES = (torch.float32, torch.bfloat16, torch.float16)
# torchao's floor under amax in the FP8 scale (float8_utils.EPS).
_EPS = 1e-12


@dataclass(frozen=True)
class _Kind:
    forward: str  # element format (short name) of forward operands
    grads: tuple[str, ...]  # accepted gradient formats, the default first
    block: int  # block along K (0: per-tensor or per-row FP32 scales)
    scale: str | None  # the instruction's block-scale format
    scale_rules: tuple[str, ...]  # accepted scale_rule values, the default first (empty: none to choose)


RECIPES = {
    "mxfp8": _Kind("e4m3", ("e4m3", "e5m2"), 32, "e8m0", ("floor", "rceil")),
    "mxfp6": _Kind("e2m3", ("e2m3", "e3m2"), 32, "e8m0", ("floor", "rceil")),
    "mxfp4": _Kind("e2m1", ("e2m1",), 32, "e8m0", ("floor", "rceil")),
    "nvfp4": _Kind("e2m1", ("e2m1",), 16, "ue4m3", ()),
    "fp8_tensorwise": _Kind("e4m3", ("e5m2", "e4m3"), 0, None, ()),
    "fp8_rowwise": _Kind("e4m3", ("e4m3", "e5m2"), 0, None, ()),
}
_GRAD_ROUNDINGS = ("rne", "sr")


@dataclass(frozen=True)
class Recipe:
    """A checked recipe: its ``name``, element formats (softfloat16 names), ``scale_rule``,
    ``grad_rounding``, and the instruction for each (A format, B format) pair its GEMMs meet."""

    name: str
    forward: str
    grad: str
    scale_rule: str | None
    grad_rounding: str
    instructions: dict = field(compare=False)

    def __repr__(self) -> str:
        rule = "" if self.scale_rule is None else f", scale_rule={self.scale_rule!r}"
        return (f"gemm={self.name!r}{rule}, grad_format={_short(self.grad)!r}, "
                f"grad_rounding={self.grad_rounding!r}")

    def products(self, machine, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        """FP32 patterns of ``a @ b`` (2-D tensors) under this recipe: :func:`products`."""
        return products(machine, a, b)

    def settings(self) -> dict:
        """The recipe as emulate()'s keyword arguments (JSON)."""
        return {"gemm": self.name, "scale_rule": self.scale_rule, "grad_format": _short(self.grad),
                "grad_rounding": self.grad_rounding}


def _short(fmt: str) -> str:
    """The short name a recipe spells an element format by (e4m3 ...; a format alias) from its full
    name (fp8_e4m3fn ...)."""
    names = {name for kind in RECIPES.values() for name in (kind.forward, *kind.grads)}
    return next(short for short in sorted(names) if sf.format(short).name == fmt)


def recipe(gemm: str | None, tensor_core, *, scale_rule: str | None = None, grad_format: str | None = None,
           grad_rounding: str | None = None) -> Recipe | None:
    """emulate()'s recipe options checked (one line naming the argument otherwise): None without ``gemm``."""
    if gemm is None:
        given = [name for name, value in (("scale_rule", scale_rule), ("grad_format", grad_format),
                                          ("grad_rounding", grad_rounding)) if value is not None]
        if given:
            raise ValueError(f"{given[0]}: a low-precision GEMM option; it needs a recipe, gemm= one of "
                             f"{', '.join(RECIPES)}")
        return None
    kind = RECIPES.get(gemm) if isinstance(gemm, str) else None
    if kind is None:
        raise ValueError(f"gemm: unknown recipe {gemm!r}; accepted: {', '.join(RECIPES)}")
    if scale_rule is not None and not kind.scale_rules:
        raise ValueError(f"scale_rule: {gemm} has no scale rule to choose (only the MX recipes: floor or rceil)")
    rule = kind.scale_rules[0] if scale_rule is None and kind.scale_rules else scale_rule
    if kind.scale_rules and rule not in kind.scale_rules:
        raise ValueError(f"scale_rule: unknown {scale_rule!r}; accepted: {', '.join(kind.scale_rules)}")
    grad = kind.grads[0] if grad_format is None else grad_format
    if grad not in kind.grads:
        raise ValueError(f"grad_format: {gemm} takes gradients in {' or '.join(kind.grads)}, got {grad_format!r}")
    grad_rounding = "rne" if grad_rounding is None else grad_rounding
    if grad_rounding not in _GRAD_ROUNDINGS:
        raise ValueError(f"grad_rounding: expected 'rne' or 'sr' (stochastic), got {grad_rounding!r}")
    if tensor_core is None:
        example = '"b200" (Blackwell)' if kind.block else '"h100"'
        raise ValueError(f"tensor_core: gemm={gemm!r} runs on a GPU's matrix unit: name one, e.g. tensor_core="
                         f"{example}, or an instruction preset of softfloat16.mma")
    forward, grad = sf.format(kind.forward).name, sf.format(grad).name  # (the registry's aliases)
    pairs = {(forward, forward), (grad, forward), (forward, grad)}
    instructions = {pair: _instruction(gemm, kind, tensor_core, *pair) for pair in sorted(pairs)}
    return Recipe(gemm, forward, grad, rule, grad_rounding, instructions)


def _instruction(gemm: str, kind: _Kind, tensor_core, a: str, b: str) -> Preset:
    """The instruction that runs ``gemm``'s GEMMs of A in ``a`` and B in ``b`` on ``tensor_core``."""
    what = f"gemm={gemm!r} ({_short(a)} x {_short(b)}"
    if kind.block == 0:
        try:
            found = tensor_cores.resolve(tensor_core, a, b, "fp32")
        except ValueError as error:
            raise ValueError(f"tensor_core: {str(error).removeprefix('tensor_core: ')} ({what}))") from None
        if found.scale is not None or (found.a, found.b, found.d) != (a, b, "fp32"):
            raise ValueError(f"tensor_core: {found.name} cannot run {what} -> fp32, unscaled)")
        return found
    what += f", {kind.scale} scales per {kind.block})"
    if isinstance(tensor_core, TensorCore):
        raise ValueError(f"tensor_core: a TensorCore has no block scales; {what} needs a block-scaled instruction "
                         "(a Blackwell GPU such as 'b200', or a preset)")
    if isinstance(tensor_core, str) and tensor_core not in PRESETS:  # a GPU or an architecture (checked)
        arch = tensor_cores.TENSOR_CORES.get(tensor_core, tensor_core)
        found = _scaled(arch, a, b, kind.scale, kind.block)
        if found is None:
            archs = sorted({p.arch for p in PRESETS.values() if p.scale is not None})
            raise ValueError(f"tensor_core: {tensor_core} ({arch}) has no block-scaled instruction for {what}; "
                             f"{', '.join(archs)} have them")
        return found
    found = mma.preset(tensor_core)
    if (found.a, found.b, found.scale, found.block) != (a, b, kind.scale, kind.block):
        raise ValueError(f"tensor_core: {found.name} cannot run {what}; name a GPU (e.g. 'b200') to pick the "
                         "instruction for each GEMM's formats")
    return found


@functools.cache
def _scaled(arch: str, a: str, b: str, scale: str, block: int) -> Preset | None:
    """The block-scaled instruction of ``arch`` a GEMM kernel issues: tcgen05 before mma, the largest k."""
    found = [p for p in PRESETS.values()
             if p.arch == arch and (p.a, p.b, p.scale, p.block) == (a, b, scale, block)]
    return min(found, key=lambda p: (p.instruction != "tcgen05", -p.k, -p.m * p.n, p.name), default=None)


# --- which operand is a gradient ------------------------------------------------------------------

def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


class OpRoles:
    """Where the GEMM operands of the op running now come from: ``backward`` (autograd's backward
    pass), the storages of the tensors its autograd node saved in forward (``saved``) and of its
    other tensor arguments (``gradients``: the incoming gradient), and for a transposed
    convolution's backward the GEMM calls whose B is the gradient (``b_calls``)."""

    def __init__(self, func, args) -> None:
        task = getattr(torch._C, "_current_graph_task_id", None)
        self.backward = task is not None and task() != -1
        self.calls = 0
        self._op = (func, args)
        self.saved: set[int] | None = None  # found at the op's first GEMM (most ops have none)
        self.gradients: set[int] = set()
        self.b_calls: frozenset[int] = frozenset()

    def _find(self) -> None:
        func, args = self._op
        self.saved = set()
        node = torch._C._current_autograd_node()
        if node is not None:
            for name in dir(node):
                if name.startswith("_saved_"):
                    value = getattr(node, name, None)
                    for item in value if isinstance(value, (tuple, list)) else (value,):
                        if isinstance(item, torch.Tensor):
                            self.saved.add(_storage(item))
        for item in args:
            if isinstance(item, torch.Tensor) and _storage(item) not in self.saved:
                self.gradients.add(_storage(item))
        if func.overloadpacket.__name__ == "convolution_backward" and len(args) > 10 and args[7]:
            # conv.py's GEMMs for a transposed convolution: `groups` calls for the input gradient (if
            # asked), then `groups` for the weight gradient, whose B (im2col of dy) is the gradient.
            groups, mask = int(args[9]), args[10]
            first = groups if mask[0] else 0
            self.b_calls = frozenset(range(first, first + groups)) if mask[1] else frozenset()

    def gradient(self, a: torch.Tensor, b: torch.Tensor) -> str | None:
        """"a" or "b": the operand that is a gradient (None in forward). An operand sharing storage
        with the incoming gradient is it; else the one beside a saved forward tensor; else B for a
        transposed convolution's weight gradient, A otherwise (every other backward GEMM of
        torch's formulas and of the mode's convolution has the gradient on the left)."""
        if not self.backward:
            return None
        if self.saved is None:
            self._find()
        call, self.calls = self.calls, self.calls + 1
        sa, sb = _storage(a), _storage(b)
        if (sa in self.gradients) != (sb in self.gradients):
            return "a" if sa in self.gradients else "b"
        if (sa in self.saved) != (sb in self.saved):
            return "b" if sa in self.saved else "a"
        return "b" if call in self.b_calls else "a"


# --- the GEMM ---------------------------------------------------------------------------------------

def products(machine, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """FP32 patterns of ``a @ b`` (2-D) under the machine's recipe."""
    r = machine.recipe
    for t in (a, b):
        if t.dtype not in _TAKES:
            raise EmulationError(f"gemm={r.name!r}: a matmul operand of {t.dtype}; the recipe quantises float32, "
                                 "bfloat16 and float16 operands")
    roles = machine.roles
    gradient = roles.gradient(a, b) if roles is not None else None
    fa = r.grad if gradient == "a" else r.forward
    fb = r.grad if gradient == "b" else r.forward
    p = r.instructions[(fa, fb)]
    xa, xb = bits(a), bits(b)
    src_a, src_b = DTYPE_FORMATS[a.dtype].name, DTYPE_FORMATS[b.dtype].name
    sr = r.grad_rounding == "sr"
    options_a = {"rounding": "sr", "seed": machine.draw()} if sr and gradient == "a" else {}
    options_b = {"rounding": "sr", "seed": machine.draw()} if sr and gradient == "b" else {}
    if a.shape[1] == 0:
        return np.zeros((a.shape[0], b.shape[1]), np.uint32)
    if p.scale is None:
        return _fp8_products(r.name, p, xa, src_a, fa, options_a, xb, src_b, fb, options_b)
    pad = -a.shape[1] % p.k  # whole instructions: zero products, as a kernel pads its last tile
    xa = np.pad(xa, ((0, 0), (0, pad)))
    xb = np.pad(xb, ((0, pad), (0, 0)))
    mx_a = "nvfp4" if r.name == "nvfp4" else _MX[fa]
    mx_b = "nvfp4" if r.name == "nvfp4" else _MX[fb]
    rule = {} if r.scale_rule is None else {"scale_rule": r.scale_rule}
    qa = mx.quantize(xa, mx_a, axis=1, src=src_a, **rule, **options_a)
    qb = mx.quantize(xb, mx_b, axis=0, src=src_b, **rule, **options_b)
    return np.asarray(mx.matmul(qa, qb, p), np.uint32)


def fp8_scales(x32: np.ndarray, fmt: str, axis: int | None, power_of_2: bool) -> np.ndarray:
    """FP32 scales (float32) of FP32 values ``x32`` for an FP8 format: fp8_max / max(amax, 1e-12)
    computed in float64 and rounded to FP32, amax over the whole tensor (``axis`` None) or along
    ``axis`` (kept as a length-1 axis); ``power_of_2``: rounded down to a power of two (exactly)."""
    amax = np.max(np.abs(x32.astype(np.float64)), axis=axis, keepdims=axis is not None)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scale = (float(FORMATS[fmt].value(FORMATS[fmt].max_finite)) / np.maximum(amax, _EPS)).astype(np.float32)
    if power_of_2:
        finite = np.isfinite(scale) & (scale > 0)
        scale = np.where(finite, (scale.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32), scale)
    return np.asarray(scale, np.float32)


def _fp8_operand(x: np.ndarray, src: str, fmt: str, axis: int | None, power_of_2: bool, options: dict):
    """(FP8 patterns, FP32 inverse scales): fl32(x * scale) rounded (saturating) into ``fmt``."""
    x32 = np.asarray(sf.convert(x, src=src, dst=FP32)).view(np.float32) if src != "fp32" else x.view(np.float32)
    scale = fp8_scales(x32, fmt, axis, power_of_2)
    scaled = FP32.mul(x32.view(np.uint32), np.broadcast_to(scale, x32.shape).view(np.uint32))
    q = np.asarray(sf.convert(scaled, src=FP32, dst=fmt, saturate=True, **options))
    inverse = np.asarray(FP32.div(np.full(scale.shape, 0x3F800000, np.uint32), scale.view(np.uint32)))
    return q, inverse


def _fp8_products(name: str, p: Preset, xa, src_a, fa, options_a, xb, src_b, fb, options_b) -> np.ndarray:
    rowwise = name == "fp8_rowwise"
    qa, inv_a = _fp8_operand(xa, src_a, fa, 1 if rowwise else None, rowwise, options_a)
    qb, inv_b = _fp8_operand(xb, src_b, fb, 0 if rowwise else None, rowwise, options_b)
    acc = np.asarray(mma.gemm(qa, qb, p), np.uint32)
    factor = np.asarray(FP32.mul(inv_a, inv_b))  # a scalar, or (M, 1) x (1, N) -> (M, N)
    return np.asarray(FP32.mul(acc, np.broadcast_to(factor, acc.shape)), np.uint32)
