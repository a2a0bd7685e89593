"""softfloat16: bit-exact software floating point (FP16, BF16, FP32 and friends) for numpy arrays.

>>> import softfloat16 as sf
>>> hex(sf.fp16.add(0x3C00, 0x0001, rounding="rtz"))   # 1 + 2**-24, truncated
'0x3c00'
"""
from .compare import to_hex as hex  # noqa: A004 - `sf.hex(bits, fmt)`, as the API names it
from .flags import Flag
from .formats import (
    FORMATS, Format, bf16, e8m0, format, fp4_e2m1, fp6_e2m3, fp6_e3m2, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2,
    fp8_e5m2fnuz, fp16, fp32, tf32, tf32_fp32,
)
from .ops import as_bits, convert
from . import format_methods  # noqa: F401,E402  (attaches sf.fp16.add & co. to Format)
from .profiles import PROFILES, NanProfile
from .rounding import ROUNDING_NAMES, Rounding
from . import exact, linalg, mma, mx, packing, stochastic  # noqa: E402  (after the names they use)
from .threads import get_num_threads, set_num_threads

__all__ = [
    "FORMATS", "Flag", "Format", "NanProfile", "PROFILES", "ROUNDING_NAMES", "Rounding", "get_num_threads",
    "set_num_threads",
    "as_bits", "bf16", "convert", "e8m0", "exact", "format", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "fp8_e4m3fn",
    "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz", "fp16", "fp32", "hex", "linalg", "mma", "mx", "packing", "stochastic",
    "tf32", "tf32_fp32",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``sf.torch`` imports the optional dispatch mode on first use (``import softfloat16`` alone
    never imports torch)."""
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'softfloat16' has no attribute {name!r}")
