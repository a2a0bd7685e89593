"""The arithmetic methods of ``Format`` (``sf.fp16.add(a, b)`` ...): thin wrappers over
``softfloat16.ops``, attached to the class here. ``formats`` describes formats and imports nothing
of the arithmetic; ``ops`` reads ``formats``; this module, imported by the package, joins the two,
so that no module imports one that imports it back.
"""
from __future__ import annotations

from . import ops
from .formats import Format


def add(self: Format, a, b, **options):
    """Correctly rounded a + b on bit patterns.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.add(0x3C00, 0x3C00))   # 1 + 1
    '0x4000'
    """
    return ops.binary("add", self, a, b, **options)


def sub(self: Format, a, b, **options):
    """Correctly rounded a - b.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.sub(0x3C00, 0x3C00))   # 1 - 1 = +0
    '0x0'
    """
    return ops.binary("sub", self, a, b, **options)


def mul(self: Format, a, b, **options):
    """Correctly rounded a * b.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.mul(0x4000, 0xC200))   # 2 * -3
    '0xc600'
    """
    return ops.binary("mul", self, a, b, **options)


def div(self: Format, a, b, **options):
    """Correctly rounded a / b.

    >>> import softfloat16 as sf
    >>> r, fl = sf.fp16.div(0x3C00, 0x0000, flags=True)   # 1 / 0
    >>> hex(r), sf.Flag(fl)
    ('0x7c00', <Flag.DIVIDE_BY_ZERO: 8>)
    """
    return ops.binary("div", self, a, b, **options)


def fma(self: Format, a, b, c, **options):
    """a * b + c with a single rounding.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.fma(0x3C01, 0x3C01, 0xBC02))   # (1+2^-10)^2 - (1+2^-9) = 2^-20, exact
    '0x10'
    """
    return ops.ternary("fma", self, a, b, c, **options)


def sqrt(self: Format, a, **options):
    """Correctly rounded square root.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.sqrt(0x4400))   # sqrt(4)
    '0x4000'
    """
    return ops.unary("sqrt", self, a, **options)


def eq(self: Format, a, b, **options):
    """IEEE quiet equality (NaN != NaN, +0 == -0) -> bool array.

    >>> import softfloat16 as sf
    >>> bool(sf.fp16.eq(0x0000, 0x8000))
    True
    """
    return ops.compare("eq", self, a, b, **options)


def lt(self: Format, a, b, **options):
    """IEEE quiet a < b -> bool array (False when either is NaN).

    >>> import softfloat16 as sf
    >>> bool(sf.fp16.lt(0xBC00, 0x3C00))
    True
    """
    return ops.compare("lt", self, a, b, **options)


def le(self: Format, a, b, **options):
    """IEEE quiet a <= b -> bool array (False when either is NaN).

    >>> import softfloat16 as sf
    >>> bool(sf.fp16.le(0x7E00, 0x7E00))
    False
    """
    return ops.compare("le", self, a, b, **options)


def from_float(self: Format, x, **options):
    """Round float64/float32/float16/integer values into this format, directly from their exact value.

    >>> import softfloat16 as sf
    >>> hex(sf.fp16.from_float(0.1))
    '0x2e66'
    """
    return ops.from_float(self, x, **options)


def to_float(self: Format, bits, **options):
    """Exact float64 values of bit patterns.

    >>> import softfloat16 as sf
    >>> float(sf.fp16.to_float(0x3555))
    0.333251953125
    """
    return ops.to_float(self, bits, **options)


for _method in (add, sub, mul, div, fma, sqrt, eq, lt, le, from_float, to_float):
    _method.__qualname__ = f"Format.{_method.__name__}"
    setattr(Format, _method.__name__, _method)
