"""Two FP4 (E2M1) codes per byte, in the layout of PyTorch's ``torch.float4_e2m1fn_x2``.

Inside softfloat16 an FP4 value is one uint8 holding its 4-bit code (sign, 2 exponent bits,
1 fraction bit) in bits 0-3. Storage and exchange formats pack two per byte; along the packed
axis, **element 2k goes in bits 0-3 (the low nibble) and element 2k+1 in bits 4-7 (the high
nibble)** of byte k. That is PyTorch's layout, stated in ``torch/headeronly/util/Float4_e2m1fn_x2.h``
(PyTorch 2.13: "val1 : val0 ... bit index 7654 : 3210"), and what its ``pack_uint4`` helper
(torch/testing/_internal/common_quantized.py: ``uint8_data[1::2] << 4 | uint8_data[::2]``) and
its ONNX exporter's ``unpack_float4x2_as_uint8`` (low nibble first) do.

Numpy only: a ``torch.float4_e2m1fn_x2`` tensor ``t`` comes in as ``t.view(torch.uint8).numpy()``
and goes back with ``torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)``.
"""
from __future__ import annotations

import numpy as np


def _integer_array(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array, got dtype {array.dtype}")
    if array.ndim == 0:
        raise ValueError(f"{name}: expected an array with at least one axis, got a scalar")
    return array


def _check_range(array: np.ndarray, limit: int, name: str, what: str) -> None:
    outside = (array < 0) | (array >= limit)
    if outside.any():
        raise ValueError(f"{name}: {what} must be in 0..{limit - 1}, found {array[outside].flat[0]}")


def _axis_index(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis: {axis} is out of range for an array with {ndim} axes")
    return axis % ndim


def pack_fp4(bits, axis: int = -1) -> np.ndarray:
    """Pack FP4 codes (one per element, values 0..15) two per byte along ``axis``.

    Byte k of the result holds element 2k in bits 0-3 and element 2k+1 in bits 4-7, the layout of
    ``torch.float4_e2m1fn_x2``. ``axis`` must have an even length, which the result halves.

    >>> codes = np.array([0x2, 0xF, 0x1, 0x7], dtype=np.uint8)  # 1.0, -6.0, 0.5, 6.0
    >>> [hex(byte) for byte in pack_fp4(codes)]
    ['0xf2', '0x71']
    >>> pack_fp4(np.array([[1, 2, 3], [4, 5, 6]]), axis=0)
    array([[65, 82, 99]], dtype=uint8)
    """
    array = _integer_array(bits, "bits")
    axis = _axis_index(axis, array.ndim)
    length = array.shape[axis]
    if length % 2:
        raise ValueError(
            f"axis: pack_fp4 needs an even length along axis {axis} (of shape {array.shape}), got {length}")
    _check_range(array, 16, "bits", "FP4 codes")
    codes = np.moveaxis(array.astype(np.uint8), axis, -1)
    packed = codes[..., 0::2] | (codes[..., 1::2] << np.uint8(4))
    return np.ascontiguousarray(np.moveaxis(packed, -1, axis))


def unpack_fp4(packed, axis: int = -1) -> np.ndarray:
    """The inverse of :func:`pack_fp4`: each byte (0..255) becomes two FP4 codes along ``axis``,
    its bits 0-3 first, then its bits 4-7; that axis doubles in length.

    >>> unpack_fp4(np.array([0xF2, 0x71], dtype=np.uint8))
    array([ 2, 15,  1,  7], dtype=uint8)
    >>> codes = np.arange(24, dtype=np.uint8).reshape(3, 2, 4) % 16
    >>> bool((unpack_fp4(pack_fp4(codes, axis=1), axis=1) == codes).all())
    True
    """
    array = _integer_array(packed, "packed")
    axis = _axis_index(axis, array.ndim)
    _check_range(array, 256, "packed", "bytes")
    packed_bytes = np.moveaxis(array.astype(np.uint8), axis, -1)
    codes = np.empty((*packed_bytes.shape[:-1], 2 * packed_bytes.shape[-1]), dtype=np.uint8)
    codes[..., 0::2] = packed_bytes & np.uint8(0x0F)
    codes[..., 1::2] = packed_bytes >> np.uint8(4)
    return np.ascontiguousarray(np.moveaxis(codes, -1, axis))
