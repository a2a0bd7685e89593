"""Loops that map a scalar kernel over flat arrays, specialised per kernel and format.

``make_loop`` builds one Numba loop per (kernel, format widths): the kernel is inlined and the
widths become compile-time constants, so the compiler folds every mask and bias. Rounding mode
and the other options stay run-time values (the same for the whole array, so their branches predict
perfectly). Loops are serial: results never depend on a thread count.

The closures capture only integers and find their kernel in the module-level ``KERNELS`` tuple:
Numba keys its on-disk cache on the captured values, and integers (unlike function objects) give
the same key in every process, so a second process loads the compiled loop instead of recompiling.
"""
from collections import namedtuple

from numba import njit

from . import arith, convert

NAMES = ("add", "sub", "mul", "div", "eq", "lt", "le", "fma", "sqrt", "convert", "from_int", "to_float64_bits")
# A namedtuple, not a plain tuple: Numba types a plain tuple of functions as a tuple of function
# pointers (indirect calls, no inlining); a namedtuple keeps each element's own dispatcher type.
KERNELS = namedtuple("Kernels", NAMES)(
    arith.add, arith.sub, arith.mul, arith.div, convert.eq, convert.lt, convert.le,
    arith.fma, arith.sqrt, convert.convert, convert.from_int, convert.to_float64_bits)
ARITY = dict.fromkeys(NAMES[:7], 2) | {"fma": 3} | dict.fromkeys(NAMES[8:], 1)


def make_loop(name, ebits, fbits, src_ebits=0, src_fbits=0, defaults=False, keep_flags=True):
    """A compiled ``loop(*operands, out, flags, cfg)`` applying kernel ``name`` elementwise.

    ``defaults=True`` also folds in the default options (rne, no ftz, no daz, tininess after),
    for the configuration where speed matters most; otherwise they are read from ``cfg``.
    ``keep_flags=False`` leaves ``flags`` untouched, and the compiler drops the flag logic.
    """
    index = NAMES.index(name)
    arity = ARITY[name]
    if arity == 1:
        @njit(cache=True, error_model="numpy")
        def loop1(a, out, flags, cfg):
            kernel = KERNELS[index]
            cfg = (ebits, fbits) + ((0, 0, 0, 0) if defaults else cfg[2:6]) + cfg[6:9] + (src_ebits, src_fbits)
            for i in range(out.size):
                bits, fl = kernel(a[i], cfg)
                out[i] = bits
                if keep_flags:
                    flags[i] = fl
        return loop1
    if arity == 2:
        @njit(cache=True, error_model="numpy")
        def loop2(a, b, out, flags, cfg):
            kernel = KERNELS[index]
            cfg = (ebits, fbits) + ((0, 0, 0, 0) if defaults else cfg[2:6]) + cfg[6:9] + (src_ebits, src_fbits)
            for i in range(out.size):
                bits, fl = kernel(a[i], b[i], cfg)
                out[i] = bits
                if keep_flags:
                    flags[i] = fl
        return loop2

    @njit(cache=True, error_model="numpy")
    def loop3(a, b, c, out, flags, cfg):
        kernel = KERNELS[index]
        cfg = (ebits, fbits) + ((0, 0, 0, 0) if defaults else cfg[2:6]) + cfg[6:9] + (src_ebits, src_fbits)
        for i in range(out.size):
            bits, fl = kernel(a[i], b[i], c[i], cfg)
            out[i] = bits
            if keep_flags:
                flags[i] = fl
    return loop3
