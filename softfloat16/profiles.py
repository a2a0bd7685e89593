"""NaN behaviour of real machines, as data that the kernels read (never branches per machine).

A profile says whether a NaN operand propagates (quieted, payload kept) or is replaced by the
machine's canonical NaN, and which NaN an invalid operation (inf - inf, 0 * inf, 0/0, sqrt(-1))
produces. Both NaNs depend on the format, so they are computed from it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .formats import Format


@dataclass(frozen=True)
class NanProfile:
    name: str
    propagate: bool          # NaN operand -> first NaN operand quieted (else canonical NaN)
    invalid_negative: bool   # invalid operation gives -qNaN (x86 "indefinite") instead of +qNaN
    all_ones: bool           # canonical NaN is all ones but the sign (CUDA), not just the quiet bit

    def invalid_nan(self, fmt: Format) -> int:
        """Bits of the NaN an invalid operation returns in format ``fmt`` (+0 in a format without
        NaN, docs/formats-spec.md).

        >>> import softfloat16 as sf
        >>> [hex(PROFILES[name].invalid_nan(sf.fp16)) for name in ("ieee", "x86", "cuda")]
        ['0x7e00', '0xfe00', '0x7fff']
        >>> [hex(PROFILES["x86"].invalid_nan(f)) for f in (sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp4_e2m1)]
        ['0xff', '0x80', '0x0']
        """
        negative = self.invalid_negative and fmt.signed and fmt.top_nans != "none"  # a NaN of each sign
        return self.canonical_nan(fmt) | (fmt.sign_mask if negative else 0)

    def canonical_nan(self, fmt: Format) -> int:
        """Bits of this machine's positive canonical NaN in format ``fmt`` (the one NaN of the
        formats that have one or two; +0, the stand-in, in a format without NaN)."""
        if fmt.quiet_nans:  # the NaNs without payload: one of them, whatever the machine
            return fmt.default_nan if fmt.has_nan else 0
        return fmt.magnitude_mask & ~((1 << fmt.storage_shift) - 1) if self.all_ones else fmt.default_nan


PROFILES = {
    "ieee": NanProfile("ieee", propagate=True, invalid_negative=False, all_ones=False),
    "x86": NanProfile("x86", propagate=True, invalid_negative=True, all_ones=False),
    "riscv": NanProfile("riscv", propagate=False, invalid_negative=False, all_ones=False),
    "cuda": NanProfile("cuda", propagate=False, invalid_negative=False, all_ones=True),
}
PROFILES["arm"] = PROFILES["riscv"]  # ARM with default-NaN mode (FPCR.DN = 1)


def parse_profile(nan: str | NanProfile) -> NanProfile:
    """The NanProfile for a name: ``"ieee"``, ``"x86"``, ``"riscv"``, ``"arm"`` or ``"cuda"``.

    >>> parse_profile("x86").invalid_negative
    True
    """
    if isinstance(nan, NanProfile):
        return nan
    if isinstance(nan, str) and nan.strip().lower() in PROFILES:
        return PROFILES[nan.strip().lower()]
    raise ValueError(f"nan: unknown NaN profile {nan!r}; accepted: {', '.join(PROFILES)}")


TININESS = ("after", "before")


def parse_tininess(tininess: str) -> bool:
    """True when tininess is detected before rounding (ARM), False after rounding (x86, RISC-V).

    >>> parse_tininess("after")
    False
    """
    if isinstance(tininess, str) and tininess.strip().lower() in TININESS:
        return tininess.strip().lower() == "before"
    raise ValueError(f"tininess: unknown value {tininess!r}; accepted: {', '.join(TININESS)}")
