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

__all__ = ["DTYPE_FORMATS", "INTEGER_VIEWS", "SATURATING", "TRACE_DTYPES", "bits", "format_of", "from_bits",
           "is_emulated", "trace_format"]

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


def from_bits(patterns, dtype: torch.dtype, shape: tuple | torch.Size | None = None) -> torch.Tensor:
    """A new contiguous CPU tensor of ``dtype`` holding these bit patterns (reshaped or broadcast to
    ``shape``).

    >>> from_bits(np.array([0x3C00, 0x7C00], np.uint16), torch.float16)
    tensor([1., inf], dtype=torch.float16)
    """
    fmt = DTYPE_FORMATS[dtype]
    array = np.asarray(patterns)
    if shape is not None and array.shape != tuple(shape):
        shape = tuple(shape)
        same_size = array.size == int(np.prod(shape, dtype=np.int64))
        array = array.reshape(shape) if same_size else np.broadcast_to(array, shape)
    # A fresh, writable, contiguous array: torch takes ownership of its memory.
    array = np.array(array, dtype=fmt.dtype, order="C", copy=True)
    signed = {np.uint8: np.uint8, np.uint16: np.int16, np.uint32: np.int32}[fmt.dtype]
    return torch.from_numpy(array.view(signed)).view(dtype)
