"""Loops that map a scalar kernel over flat arrays, specialised per kernel and format.

``make_loop`` builds one Numba loop per (kernel, arity, format widths): the kernel is inlined and
the widths become compile-time constants, so the compiler folds every mask and bias. Rounding mode
and the other options stay run-time values (the same for the whole array, so their branches predict
perfectly). Loops are serial: results never depend on a thread count.
"""
from numba import njit


def make_loop(kernel, arity, ebits, fbits, src_ebits=0, src_fbits=0):
    """A compiled loop ``loop(*operands, out, flags, cfg)`` for ``kernel`` of ``arity`` operands."""
    if arity == 1:
        @njit(cache=True)
        def loop1(a, out, flags, cfg):
            cfg = (ebits, fbits) + cfg[2:9] + (src_ebits, src_fbits)
            keep_flags = flags.size != 0
            for i in range(out.size):
                bits, fl = kernel(a[i], cfg)
                out[i] = bits
                if keep_flags:
                    flags[i] = fl
        return loop1
    if arity == 2:
        @njit(cache=True)
        def loop2(a, b, out, flags, cfg):
            cfg = (ebits, fbits) + cfg[2:9] + (src_ebits, src_fbits)
            keep_flags = flags.size != 0
            for i in range(out.size):
                bits, fl = kernel(a[i], b[i], cfg)
                out[i] = bits
                if keep_flags:
                    flags[i] = fl
        return loop2

    @njit(cache=True)
    def loop3(a, b, c, out, flags, cfg):
        cfg = (ebits, fbits) + cfg[2:9] + (src_ebits, src_fbits)
        keep_flags = flags.size != 0
        for i in range(out.size):
            bits, fl = kernel(a[i], b[i], c[i], cfg)
            out[i] = bits
            if keep_flags:
                flags[i] = fl
    return loop3
