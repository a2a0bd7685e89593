"""Vectorised entry points: validate arguments, broadcast, call a Numba loop, shape the result."""
from __future__ import annotations

import functools

import numpy as np

from ._kernels import loops
from .flags import Flag  # noqa: F401  (defined apart so that softfloat16.exact shares it)
from .formats import Format, as_bits, format as parse_format
from .profiles import parse_profile, parse_tininess
from .rounding import parse_rounding


_UNARY = ("sqrt",)
_BINARY = ("add", "sub", "mul", "div")
_COMPARE = ("eq", "lt", "le")
_TERNARY = ("fma",)
_FLOAT64 = (11, 52)


def _config(fmt: Format, rounding="rne", ftz=False, daz=False, nan="ieee", tininess="after",
            src: tuple[int, int] = (0, 0)) -> loops.Options:
    """The kernels' options record (softfloat16._kernels.core.Options), after validating every option.

    >>> _config(parse_format("fp16"), rounding="rtz", nan="x86").rounding
    2
    """
    for name, value in (("ftz", ftz), ("daz", daz)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name}: expected True or False, got {value!r}")
    profile = parse_profile(nan)
    return loops.Options(
        exponent_bits=fmt.exponent_bits, fraction_bits=fmt.fraction_bits, rounding=int(parse_rounding(rounding)),
        ftz=int(bool(ftz)), daz=int(bool(daz)), tininess_before=int(parse_tininess(tininess)),
        nan_propagate=int(profile.propagate), invalid_nan=int(profile.invalid_nan(fmt)),
        canonical_nan=int(profile.canonical_nan(fmt)), src_exponent_bits=src[0], src_fraction_bits=src[1],
    )


def _broadcast(arrays: list[np.ndarray], names: tuple[str, ...]) -> tuple[list[np.ndarray], tuple]:
    """Flat, contiguous operands of a common broadcast shape."""
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        shapes = ", ".join(f"{n}{a.shape}" for n, a in zip(names, arrays))
        raise ValueError(f"operands could not be broadcast together: {shapes}") from None
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1) for a in arrays]
    return flat, shape


def _finish(out: np.ndarray, fl: np.ndarray, shape: tuple, want_flags: bool, scalar: bool):
    out = out.reshape(shape)
    if scalar:
        out = out[()]
    if not want_flags:
        return out
    fl = fl.reshape(shape)
    return out, (fl[()] if scalar else fl)


@functools.cache
def _loop(kernel: str, ebits: int, fbits: int, src: tuple[int, int], defaults: bool, keep_flags: bool):
    return loops.make_loop(kernel, ebits, fbits, *src, defaults, keep_flags)


def _run(kernel: str, fmt: Format, operands: dict, keywords: dict, out_dtype, src=(0, 0)):
    want_flags = keywords.pop("flags", False)
    if not isinstance(want_flags, (bool, np.bool_)):
        raise TypeError(f"flags: expected True or False, got {want_flags!r}")
    options = _config(fmt, src=src, **keywords)
    arrays, shape = _broadcast(list(operands.values()), tuple(operands))
    scalar = all(np.ndim(a) == 0 for a in operands.values())
    n = arrays[0].size
    if len(arrays) == 1 and arrays[0].dtype == np.uint16 and n >= _TABLE_MIN_SIZE:
        table, flag_table = _table(kernel, options, np.dtype(out_dtype), bool(want_flags))
        out = np.empty(n, dtype=out_dtype)
        fl = np.zeros(n if want_flags else 0, dtype=np.uint8)
        loops.lookup(arrays[0], table, out)
        if want_flags:
            loops.lookup(arrays[0], flag_table, fl)
        return _finish(out, fl, shape, want_flags, scalar)
    out = np.empty(n, dtype=out_dtype)
    fl = np.zeros(n if want_flags else 0, dtype=np.uint8)
    _loop_for(kernel, options, want_flags)(*arrays, out, fl, options)
    return _finish(out, fl, shape, want_flags, scalar)


def _loop_for(kernel: str, options: loops.Options, want_flags: bool):
    # The default options (rne, no ftz/daz, tininess after) get a loop with them folded in.
    src = (options.src_exponent_bits, options.src_fraction_bits)
    return _loop(kernel, options.exponent_bits, options.fraction_bits, src, loops.uses_defaults(options),
                 bool(want_flags))


# A unary operation on a 16-bit format reads its results from a table of all 65,536, computed
# once per configuration by the same kernel: the lookup is several times faster than the
# arithmetic, and worth building for arrays from this size on.
_TABLE_MIN_SIZE = 1 << 15


@functools.lru_cache(maxsize=64)
def _table(kernel: str, options: loops.Options, out_dtype: np.dtype, want_flags: bool):
    every = np.arange(1 << 16, dtype=np.uint16)
    table = np.empty(1 << 16, dtype=out_dtype)
    flag_table = np.zeros(1 << 16 if want_flags else 0, dtype=np.uint8)
    _loop_for(kernel, options, want_flags)(every, table, flag_table, options)
    return table, flag_table


def _check_op(op: str, accepted: tuple[str, ...]) -> str:
    if op not in accepted:
        raise ValueError(f"op: unknown operation {op!r}; accepted: {', '.join(accepted)}")
    return op


def _check_options(options: dict) -> None:
    allowed = {"rounding", "ftz", "daz", "nan", "tininess", "flags"}
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"unknown keyword argument(s) {sorted(unknown)}; accepted: {sorted(allowed)}")


def _elementwise(op: str, accepted: tuple[str, ...], fmt: Format | str, operands: dict, options: dict,
                 out_dtype=None):
    """The entry points below: validate, read the operands as bits of ``fmt``, run the loop."""
    fmt = parse_format(fmt)
    _check_options(options)
    bits = {name: as_bits(value, fmt, name) for name, value in operands.items()}
    return _run(_check_op(op, accepted), fmt, bits, options, fmt.dtype if out_dtype is None else out_dtype)


def unary(op: str, fmt: Format | str, a, **options):
    return _elementwise(op, _UNARY, fmt, {"a": a}, options)


def binary(op: str, fmt: Format | str, a, b, **options):
    return _elementwise(op, _BINARY, fmt, {"a": a, "b": b}, options)


def ternary(op: str, fmt: Format | str, a, b, c, **options):
    return _elementwise(op, _TERNARY, fmt, {"a": a, "b": b, "c": c}, options)


def compare(op: str, fmt: Format | str, a, b, **options):
    return _elementwise(op, _COMPARE, fmt, {"a": a, "b": b}, options, np.bool_)


def convert(bits, src: Format | str, dst: Format | str, **options):
    """Convert bit patterns from ``src`` to ``dst`` with one rounding from the exact value.

    >>> import softfloat16 as sf
    >>> hex(sf.convert(0x3F800001, src=sf.fp32, dst=sf.bf16, rounding="rup"))
    '0x3f81'
    """
    src, dst = parse_format(src), parse_format(dst)
    _check_options(options)
    operands = {"bits": as_bits(bits, src, "bits")}
    return _run("convert", dst, operands, options, dst.dtype,
                src=(src.exponent_bits, src.fraction_bits))


def from_float(fmt: Format | str, x, **options):
    """Round real numbers (float64, float32, float16, bfloat16 or integers) into ``fmt``.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.from_float(65520.0)), hex(sf.fp16.from_float(65520.0, rounding="rtz"))
    ('0x7c00', '0x7bff')
    """
    fmt = parse_format(fmt)
    _check_options(options)
    arr = np.asarray(x)
    if arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)  # exact widening
    kind = arr.dtype.kind
    if kind == "f" and arr.dtype.itemsize in (2, 4, 8) and arr.dtype.name in ("float16", "float32", "float64"):
        src = {2: (5, 10), 4: (8, 23), 8: _FLOAT64}[arr.dtype.itemsize]
        bits = arr.view({2: np.uint16, 4: np.uint32, 8: np.int64}[arr.dtype.itemsize])
        return _run("convert", fmt, {"x": bits}, options, fmt.dtype, src=src)
    if kind in "iu":
        if kind == "u" and arr.size and int(arr.max()) >= 1 << 63:
            raise ValueError("x: unsigned integers of 2**63 or more are not supported")
        return _run("from_int", fmt, {"x": arr.astype(np.int64)}, options, fmt.dtype)
    if kind == "b":
        raise TypeError("x: boolean arrays are not numbers here; convert them to integers first")
    raise TypeError(f"x: expected float16/float32/float64/bfloat16 or integer values, got dtype {arr.dtype}")


def to_float(fmt: Format | str, bits, **options):
    """Exact float64 values of bit patterns (every supported format fits float64 exactly)."""
    fmt = parse_format(fmt)
    _check_options(options)
    if options.get("flags"):
        raise TypeError("flags: to_float is exact and raises no flags")
    operands = {"bits": as_bits(bits, fmt, "bits")}
    result = _run("to_float64_bits", fmt, operands, options, np.int64)
    return result.view(np.float64) if isinstance(result, np.ndarray) else np.int64(result).view(np.float64)
