"""Vectorised entry points: validate arguments, broadcast, call a Numba loop, shape the result."""
from __future__ import annotations

import functools

import numpy as np

from . import threads
from ._kernels import loops
from .flags import Flag  # noqa: F401  (defined apart so that softfloat16.exact shares it)
from .formats import Format, as_bits, format as parse_format
from .profiles import parse_profile, parse_tininess
from .rounding import Rounding, parse_rounding
from .stochastic import check_sr_bits, random_words, randomness


_UNARY = ("sqrt",)
_BINARY = ("add", "sub", "mul", "div")
_COMPARE = ("eq", "lt", "le")
_TERNARY = ("fma",)
# Source formats of from_float (float64 has no Format of its own in the API) and of the operations
# that convert nothing.
_FLOAT64 = Format("float64", 11, 52, np.uint64)
_FLOAT32, _FLOAT16 = parse_format("fp32"), parse_format("fp16")
_NO_SOURCE = Format("none", 1, 1, np.uint8)


def _config(fmt: Format, rounding="rne", ftz=False, daz=False, nan="ieee", tininess="after", saturate=False,
            sr_bits=32, src: Format | None = None) -> loops.Options:
    """The kernels' options record (softfloat16._kernels.core.Options), after validating every option.
    Remembered per distinct set of options: validating them costs more than a small array's arithmetic.

    >>> _config(parse_format("fp16"), rounding="rtz", nan="x86").rounding
    2
    """
    # Only plain bools, strings and ints are remembered: True == 1 and np.True_ hash alike, but only
    # some of them are valid for a given option, and each must meet the checks once.
    plain = all(type(v) in (bool, str) for v in (rounding, ftz, daz, nan, tininess, saturate)) and type(sr_bits) is int
    key = (fmt, rounding, ftz, daz, nan, tininess, saturate, sr_bits, src) if plain else None
    options = _CONFIGS.get(key) if plain else None
    if options is None:
        options = _checked_config(fmt, rounding, ftz, daz, nan, tininess, saturate, sr_bits, src)
        if plain and len(_CONFIGS) < 4096:
            _CONFIGS[key] = options
    return options


_CONFIGS: dict[tuple, loops.Options] = {}


def _checked_config(fmt: Format, rounding, ftz, daz, nan, tininess, saturate, sr_bits, src) -> loops.Options:
    for name, value in (("ftz", ftz), ("daz", daz), ("saturate", saturate)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name}: expected True or False, got {value!r}")
    sr_bits = check_sr_bits(sr_bits)
    profile = parse_profile(nan)
    shift = fmt.storage_shift  # the kernels see TF32 in FP32 layout as compact 19-bit patterns
    src = _NO_SOURCE if src is None else src
    return loops.Options(
        exponent_bits=fmt.exponent_bits, fraction_bits=fmt.fraction_bits, encoding=fmt.encoding_code,
        rounding=int(parse_rounding(rounding)), stochastic=int(parse_rounding(rounding) == Rounding.SR),
        ftz=int(bool(ftz)), daz=int(bool(daz)),
        tininess_before=int(parse_tininess(tininess)), saturate=int(bool(saturate)), sr_bits=int(sr_bits),
        nan_propagate=int(profile.propagate), invalid_nan=int(profile.invalid_nan(fmt)) >> shift,
        canonical_nan=int(profile.canonical_nan(fmt)) >> shift,
        src_exponent_bits=src.exponent_bits if src is not _NO_SOURCE else 0,
        src_fraction_bits=src.fraction_bits if src is not _NO_SOURCE else 0, src_encoding=src.encoding_code,
    )


def _broadcast(arrays: list[np.ndarray], names: tuple[str, ...]) -> tuple[list[np.ndarray], tuple]:
    """Flat, contiguous operands of a common broadcast shape."""
    shape = arrays[0].shape
    if all(a.shape == shape and a.flags.c_contiguous for a in arrays):  # the common case, cheaply
        return [a.reshape(-1) for a in arrays], shape
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
def _loop(kernel: str, ebits: int, fbits: int, encoding: int, src: tuple[int, int, int], defaults: bool,
          keep_flags: bool, random_source: int):
    return loops.make_loop(kernel, ebits, fbits, encoding, *src, defaults, keep_flags, random_source)


def _random_source(options: loops.Options, seed, random_bits, shape: tuple) -> tuple[int, np.ndarray]:
    """(loops' RANDOM_* code, the loop's ``random`` array) for stochastic rounding's randomness."""
    seed, words = randomness(options.rounding == Rounding.SR, seed, random_bits, shape)
    if seed is not None:
        # The whole stream at once: 0.5 ns a word, where words made block by block inside the loop
        # measured 3 ns an element slower (the loop then no longer keeps its registers).
        size = int(np.prod(shape, dtype=np.int64))
        words = np.empty(size, np.uint32)

        def generate(start: int, stop: int) -> None:  # word i depends on i alone: any split gives the stream
            words[start:stop] = random_words(seed, stop - start, start=start)

        threads.run_split(size, generate)
    if words is not None:
        return loops.RANDOM_ARRAY, words
    return loops.NO_RANDOM, _NO_WORDS


_NO_WORDS = np.zeros(0, np.uint32)


def _run(kernel: str, fmt: Format, operands: dict, keywords: dict, out_dtype, src: Format | None = None):
    want_flags = keywords.pop("flags", False)
    if not isinstance(want_flags, (bool, np.bool_)):
        raise TypeError(f"flags: expected True or False, got {want_flags!r}")
    seed, random_bits = keywords.pop("seed", None), keywords.pop("random_bits", None)
    options = _config(fmt, src=src, **keywords)
    arrays, shape = _broadcast(list(operands.values()), tuple(operands))
    scalar = all(np.ndim(a) == 0 for a in operands.values())
    random_source, random = _random_source(options, seed, random_bits, shape)
    n = arrays[0].size
    out = np.empty(n, dtype=out_dtype)
    fl = np.zeros(n if want_flags else 0, dtype=np.uint8)
    if n >= _TABLE_MIN_SIZE and random_source == loops.NO_RANDOM and _tabulated(arrays):
        table, flag_table = _table(kernel, options, np.dtype(out_dtype), bool(want_flags), len(arrays))

        def look_up(start: int, stop: int) -> None:
            part = [a[start:stop] for a in arrays]
            index = part[0] if len(part) == 1 else loops.pair_index(part[0], part[1])
            loops.lookup(index, table, out[start:stop])
            if want_flags:
                loops.lookup(index, flag_table, fl[start:stop])

        threads.run_split(n, look_up)
        return _finish(out, fl, shape, want_flags, scalar)
    loop = _loop_for(kernel, options, want_flags, random_source)

    def compute(start: int, stop: int) -> None:  # element i of the run is element start + i
        loop(*(a[start:stop] for a in arrays), random[start:stop] if random.size else random, out[start:stop],
             fl[start:stop] if want_flags else fl, options)

    threads.run_split(n, compute)
    return _finish(out, fl, shape, want_flags, scalar)


def _loop_for(kernel: str, options: loops.Options, want_flags: bool, random_source: int = loops.NO_RANDOM):
    # The default options (rne, no ftz/daz, tininess after, no saturation) get a loop with them folded in.
    src = (options.src_exponent_bits, options.src_fraction_bits, options.src_encoding)
    return _loop(kernel, options.exponent_bits, options.fraction_bits, options.encoding, src,
                 loops.uses_defaults(options), bool(want_flags), random_source)


# A unary operation on 16-bit operands, and a binary one on two 8-bit operands (FP8, FP6, FP4),
# reads its results from a table of all 65,536 cases, computed once per configuration by the same
# kernel: the lookup is several times faster than the arithmetic, and worth building for arrays
# from this size on. (Not under stochastic rounding: its result depends on each element's word.)
_TABLE_MIN_SIZE = 1 << 15


def _tabulated(arrays: list[np.ndarray]) -> bool:
    """Whether the operands have a table: one uint16 operand, or two uint8 ones."""
    if len(arrays) == 1:
        return arrays[0].dtype == np.uint16
    return len(arrays) == 2 and arrays[0].dtype == np.uint8 and arrays[1].dtype == np.uint8


@functools.lru_cache(maxsize=64)
def _table(kernel: str, options: loops.Options, out_dtype: np.dtype, want_flags: bool, arity: int = 1):
    """The results (and flags) of every 16-bit operand, or of every pair of 8-bit operands at index
    a << 8 | b (loops.pair_index)."""
    every = np.arange(1 << 16, dtype=np.uint16)
    operands = [every] if arity == 1 else [(every >> 8).astype(np.uint8), (every & 0xFF).astype(np.uint8)]
    table = np.empty(1 << 16, dtype=out_dtype)
    flag_table = np.zeros(1 << 16 if want_flags else 0, dtype=np.uint8)
    _loop_for(kernel, options, want_flags)(*operands, _NO_WORDS, table, flag_table, options)
    return table, flag_table


def _check_op(op: str, accepted: tuple[str, ...]) -> str:
    if op not in accepted:
        raise ValueError(f"op: unknown operation {op!r}; accepted: {', '.join(accepted)}")
    return op


_OPTIONS = {"rounding", "ftz", "daz", "nan", "tininess", "flags", "saturate", "sr_bits", "seed", "random_bits"}


def _check_options(options: dict, exact: bool = False) -> None:
    """Unknown keywords are a TypeError; ``exact`` operations (comparisons, to_float) round nothing,
    so the rounding-only keywords are refused there."""
    allowed = _OPTIONS - ({"saturate", "sr_bits", "seed", "random_bits"} if exact else set())
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"unknown keyword argument(s) {sorted(unknown)}; accepted: {sorted(allowed)}")


def _compact(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Patterns as the kernels read them: TF32 in FP32 layout shifted down to 19 bits."""
    return bits >> fmt.dtype(fmt.storage_shift) if fmt.storage_shift else bits


def _stored(result, fmt: Format, want_flags: bool):
    """Kernel results in ``fmt``'s storage layout (the inverse of _compact)."""
    if not fmt.storage_shift:
        return result
    bits, fl = result if want_flags else (result, None)
    bits = bits << fmt.dtype(fmt.storage_shift)
    return (bits, fl) if want_flags else bits


def _check_arithmetic(fmt: Format, op: str) -> None:
    if not fmt.has_arithmetic:  # no zero (E8M0): sums and differences have nowhere to go
        raise ValueError(f"{op}: {fmt.name} is a scale format without arithmetic (it has no zero); it supports "
                         "convert, from_float, to_float and the comparisons")


def _elementwise(op: str, accepted: tuple[str, ...], fmt: Format | str, operands: dict, options: dict,
                 out_dtype=None):
    """The entry points below: validate, read the operands as bits of ``fmt``, run the loop."""
    fmt = parse_format(fmt)
    _check_op(op, accepted)
    _check_options(options, exact=out_dtype is not None)
    if out_dtype is None:
        _check_arithmetic(fmt, op)
    bits = {name: _compact(as_bits(value, fmt, name), fmt) for name, value in operands.items()}
    want_flags = bool(options.get("flags"))  # read before _run takes it out of options
    result = _run(op, fmt, bits, options, fmt.dtype if out_dtype is None else out_dtype)
    return result if out_dtype is not None else _stored(result, fmt, want_flags)


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
    >>> hex(sf.convert(0x43F00000, src=sf.fp32, dst=sf.fp8_e4m3fn))       # 480: beyond E4M3FN's 448
    '0x7f'
    >>> hex(sf.convert(0x43F00000, src=sf.fp32, dst=sf.fp8_e4m3fn, saturate=True))
    '0x7e'
    """
    src, dst = parse_format(src), parse_format(dst)
    _check_options(options)
    operands = {"bits": _compact(as_bits(bits, src, "bits"), src)}
    want_flags = bool(options.get("flags"))  # read before _run takes it out of options
    return _stored(_run("convert", dst, operands, options, dst.dtype, src=src), dst, want_flags)


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
    want_flags = bool(options.get("flags"))
    if kind == "f" and arr.dtype.itemsize in (2, 4, 8) and arr.dtype.name in ("float16", "float32", "float64"):
        src = {2: _FLOAT16, 4: _FLOAT32, 8: _FLOAT64}[arr.dtype.itemsize]
        bits = arr.view({2: np.uint16, 4: np.uint32, 8: np.int64}[arr.dtype.itemsize])
        return _stored(_run("convert", fmt, {"x": bits}, options, fmt.dtype, src=src), fmt, want_flags)
    if kind in "iu":
        if kind == "u" and arr.size and int(arr.max()) >= 1 << 63:
            raise ValueError("x: unsigned integers of 2**63 or more are not supported")
        return _stored(_run("from_int", fmt, {"x": arr.astype(np.int64)}, options, fmt.dtype), fmt, want_flags)
    if kind == "b":
        raise TypeError("x: boolean arrays are not numbers here; convert them to integers first")
    raise TypeError(f"x: expected float16/float32/float64/bfloat16 or integer values, got dtype {arr.dtype}")


def to_float(fmt: Format | str, bits, **options):
    """Exact float64 values of bit patterns (every supported format fits float64 exactly)."""
    fmt = parse_format(fmt)
    _check_options(options, exact=True)
    if options.get("flags"):
        raise TypeError("flags: to_float is exact and raises no flags")
    operands = {"bits": _compact(as_bits(bits, fmt, "bits"), fmt)}
    result = _run("to_float64_bits", fmt, operands, options, np.int64)
    return result.view(np.float64) if isinstance(result, np.ndarray) else np.int64(result).view(np.float64)
