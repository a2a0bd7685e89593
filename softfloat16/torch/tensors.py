"""Torch tensors as bit arrays and back: the dtypes the mode emulates and their formats.

A tensor's values reach the emulator as its bits, read through an integer view of the same width
(``float16`` -> ``int16`` -> ``np.uint16``), and results go back the same way, so nothing is
ever rounded by torch or numpy on the way.
"""
from __future__ import annotations

import numpy as np
import torch

import softfloat16 as sf
from softfloat16.formats import Format
from softfloat16.optrace import VALUE_FORMATS

__all__ = ["DTYPE_FORMATS", "INTEGER_VIEWS", "SATURATING", "TRACE_DTYPES", "Strided", "bits", "format_of", "from_bits",
           "is_emulated", "laid_out", "trace_format", "with_layout"]

#: Every torch dtype an op trace holds, by its format name: softfloat16.optrace.VALUE_FORMATS, the
#: one table of dtypes and format names, with the dtypes this torch has.
TRACE_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, value.dtype_name) for name, value in VALUE_FORMATS.items() if hasattr(torch, value.dtype_name)
}
_TRACE_FORMATS = {dtype: name for name, dtype in TRACE_DTYPES.items()}

#: The dtypes whose arithmetic the mode computes, and their formats: those of the table that are
#: softfloat16 formats (FP16, BF16, FP32, the FP8 formats, E8M0 where torch has it).
DTYPE_FORMATS: dict[torch.dtype, Format] = {
    dtype: VALUE_FORMATS[name].format for name, dtype in TRACE_DTYPES.items() if VALUE_FORMATS[name].format
}

#: Conversions into these formats saturate to the largest finite value, as torch's do (measured on
#: torch 2.13: float32 -> float8_e4m3fn gives 448 for 480; float8_e5m2 overflows to inf, the FNUZ
#: formats to their NaN).
SATURATING: frozenset[Format] = frozenset({sf.fp8_e4m3fn})

#: The torch integer dtype of each width, through which bits are read and written.
INTEGER_VIEWS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def trace_format(dtype: torch.dtype) -> str | None:
    """The op-trace format name of a dtype, None for one a trace does not hold.

    >>> trace_format(torch.float64), trace_format(torch.int32), trace_format(torch.quint8)
    ('fp64', 'int32', None)
    """
    return _TRACE_FORMATS.get(dtype)


def format_of(dtype: torch.dtype) -> Format | None:
    """The emulated format of a dtype, None for one the mode leaves to torch.

    >>> format_of(torch.bfloat16).name, format_of(torch.float64)
    ('bf16', None)
    """
    return DTYPE_FORMATS.get(dtype)


def is_emulated(dtype) -> bool:
    return dtype in DTYPE_FORMATS


def bits(tensor: torch.Tensor) -> np.ndarray:
    """The bit patterns of a CPU tensor of an emulated dtype, as an unsigned numpy array (a copy
    only when the tensor is not contiguous).

    >>> [hex(b) for b in bits(torch.tensor([1.0, -2.0], dtype=torch.float16))]
    ['0x3c00', '0xc000']
    """
    size = tensor.element_size()
    view = tensor.detach().contiguous().view(INTEGER_VIEWS[size])
    return view.numpy().view(_UNSIGNED[size])


class Strided(tuple):
    """A result's shape (a tuple of ints) carrying the element ``strides`` torch gives that result
    when they are not the contiguous ones (:func:`laid_out`): :func:`from_bits` lays its values out
    so. Everything else reads it as the plain shape."""

    strides: tuple[int, ...]

    def __new__(cls, shape, strides):
        self = super().__new__(cls, (int(n) for n in shape))
        self.strides = tuple(int(s) for s in strides)
        return self


def _contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return strides[::-1]


def laid_out(shape, strides) -> torch.Size | Strided:
    """``shape`` as a torch.Size when ``strides`` are its contiguous strides (size-1 dimensions and
    empty tensors ignored, as torch's ``is_contiguous``), else a :class:`Strided` carrying them.

    >>> laid_out((2, 3), (3, 1)), laid_out((2, 3), (1, 2)).strides
    (torch.Size([2, 3]), (1, 2))
    """
    shape = tuple(shape)
    if 0 in shape or all(n == 1 or s == c for n, s, c in zip(shape, strides, _contiguous_strides(shape))):
        return torch.Size(shape)
    return Strided(shape, strides)


def with_layout(tensor: torch.Tensor, shape) -> torch.Tensor:
    """``tensor`` (row-major values) with the strides of a :class:`Strided` ``shape`` (a copy that
    moves bits), or itself for a plain shape."""
    strides = getattr(shape, "strides", None)
    if strides is None or tensor.stride() == strides:
        return tensor
    return torch.empty_strided(tuple(shape), strides, dtype=tensor.dtype).copy_(tensor)


def from_bits(patterns, dtype: torch.dtype, shape: tuple | torch.Size | None = None) -> torch.Tensor:
    """A new CPU tensor of ``dtype`` holding these bit patterns (reshaped or broadcast to ``shape``,
    in row-major order): contiguous, or with the strides of a :class:`Strided` shape.

    >>> from_bits(np.array([0x3C00, 0x7C00], np.uint16), torch.float16)
    tensor([1., inf], dtype=torch.float16)
    >>> from_bits(np.arange(6, dtype=np.uint16), torch.float16, Strided((2, 3), (1, 2))).stride()
    (1, 2)
    """
    fmt = DTYPE_FORMATS[dtype]
    array = np.asarray(patterns)
    if shape is not None and array.shape != tuple(shape):
        dims = tuple(shape)
        same_size = array.size == int(np.prod(dims, dtype=np.int64))
        array = array.reshape(dims) if same_size else np.broadcast_to(array, dims)
    # A fresh, writable, contiguous array: torch takes ownership of its memory.
    array = np.array(array, dtype=fmt.dtype, order="C", copy=True)
    signed = {np.uint8: np.uint8, np.uint16: np.int16, np.uint32: np.int32}[fmt.dtype]
    return with_layout(torch.from_numpy(array.view(signed)).view(dtype), shape)
