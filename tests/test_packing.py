"""softfloat16.packing: FP4 codes two per byte, in torch.float4_e2m1fn_x2's nibble order."""
import numpy as np
import pytest

from softfloat16.packing import pack_fp4, unpack_fp4


def test_every_byte_unpacks_to_its_two_nibbles_and_packs_back():
    every_byte = np.arange(256, dtype=np.uint8)
    codes = unpack_fp4(every_byte)
    expected = [nibble for byte in range(256) for nibble in (byte % 16, byte // 16)]
    assert codes.dtype == np.uint8 and codes.tolist() == expected
    np.testing.assert_array_equal(pack_fp4(codes), every_byte)


def test_every_pair_of_codes_packs_to_its_byte():
    low, high = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    pairs = np.stack([low.ravel(), high.ravel()], axis=-1)  # (256, 2): element 0, element 1
    assert pack_fp4(pairs).ravel().tolist() == [lo + 16 * hi for lo, hi in zip(low.ravel(), high.ravel())]


def packed_by_loops(codes: np.ndarray, axis: int) -> np.ndarray:
    """The packing written with index arithmetic, element by element, as an oracle."""
    moved = np.moveaxis(codes, axis, 0)
    out = np.zeros((moved.shape[0] // 2, *moved.shape[1:]), dtype=np.uint8)
    for index in np.ndindex(*out.shape):
        k, rest = index[0], index[1:]
        out[index] = int(moved[(2 * k, *rest)]) | int(moved[(2 * k + 1, *rest)]) << 4
    return np.moveaxis(out, 0, axis)


def test_random_shapes_and_axes_round_trip():
    rng = np.random.default_rng(4)
    for _ in range(60):
        ndim = int(rng.integers(1, 5))
        shape = [int(n) for n in rng.integers(1, 6, size=ndim)]
        axis = int(rng.integers(-ndim, ndim))
        shape[axis] = 2 * int(rng.integers(0, 4))  # even, zero included
        dtype = rng.choice([np.uint8, np.int16, np.int64, np.uint32])
        codes = rng.integers(0, 16, size=shape).astype(dtype)
        packed = pack_fp4(codes, axis=axis)
        expected_shape = list(shape)
        expected_shape[axis] //= 2
        assert packed.dtype == np.uint8 and list(packed.shape) == expected_shape
        np.testing.assert_array_equal(packed, packed_by_loops(codes, axis))
        np.testing.assert_array_equal(unpack_fp4(packed, axis=axis), codes)
        np.testing.assert_array_equal(pack_fp4(unpack_fp4(packed, axis=axis), axis=axis), packed)


def test_non_contiguous_input():
    codes = np.arange(64, dtype=np.uint8).reshape(8, 8)[::2, ::-1] % 16
    np.testing.assert_array_equal(pack_fp4(codes, axis=1), packed_by_loops(codes, 1))
    np.testing.assert_array_equal(unpack_fp4(pack_fp4(codes.T, axis=0), axis=0), codes.T)


def test_nibble_order_of_the_pytorch_header():
    # PyTorch 2.13, torch/include/torch/headeronly/util/Float4_e2m1fn_x2.h: "Given two high precision
    # values val0 and val1 ... from MSB to LSB: val1 : val0, bit index 7654 : 3210". The codes come
    # from ml_dtypes' float4_e2m1fn, not from softfloat16: 1.0 = 0b0010, -6.0 = 0b1111.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, "float4_e2m1fn"):
        pytest.skip("this ml_dtypes has no float4_e2m1fn")
    values = np.array([1.0, -6.0, 0.5, 3.0], dtype=np.float32)
    codes = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    assert codes.tolist() == [0b0010, 0b1111, 0b0001, 0b0101]
    assert pack_fp4(codes).tolist() == [0b1111_0010, 0b0101_0001]  # (val1 << 4) | val0


def test_unpacking_agrees_with_torch():
    # torch 2.13 has no float -> float4_e2m1fn_x2 cast on the CPU, but its ONNX exporter ships an
    # unpacker of that dtype to one code per byte (torch/onnx/_internal/exporter/_type_casting.py).
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    try:
        from torch.onnx._internal.exporter._type_casting import get_float4_shape, unpack_float4x2_as_uint8
    except ImportError:
        pytest.skip("this torch has no ONNX float4 unpacker")
    rng = np.random.default_rng(9)
    packed = rng.integers(0, 256, size=(3, 5, 6), dtype=np.uint8)
    tensor = torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)
    ours = unpack_fp4(packed)
    assert tuple(get_float4_shape(tensor)) == ours.shape
    np.testing.assert_array_equal(unpack_float4x2_as_uint8(tensor), ours)
    # And back: our packing of torch's codes is the tensor's storage.
    np.testing.assert_array_equal(pack_fp4(unpack_float4x2_as_uint8(tensor)), tensor.view(torch.uint8).numpy())


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_odd_length_names_the_axis_and_length(axis):
    codes = np.zeros((3, 5), dtype=np.uint8)
    length = codes.shape[axis]
    with pytest.raises(ValueError, match=rf"axis.*{axis % 2}.*got {length}"):
        pack_fp4(codes, axis=axis)


@pytest.mark.parametrize("bad", [16, 0xFF, -1])
def test_codes_outside_a_nibble_raise(bad):
    codes = np.array([1, 2, bad, 3], dtype=np.int64)
    with pytest.raises(ValueError, match=rf"bits.*0\.\.15.*{bad}"):
        pack_fp4(codes)


@pytest.mark.parametrize("bad", [256, -1, 1000])
def test_bytes_outside_a_byte_raise(bad):
    with pytest.raises(ValueError, match=rf"packed.*0\.\.255.*{bad}"):
        unpack_fp4(np.array([1, bad], dtype=np.int64))


@pytest.mark.parametrize("function, name", [(pack_fp4, "bits"), (unpack_fp4, "packed")])
def test_bad_input_types_and_axes(function, name):
    with pytest.raises(TypeError, match=name):
        function(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match=name):
        function(np.array([True, False]))
    with pytest.raises(ValueError, match=name):
        function(np.uint8(3))
    with pytest.raises(ValueError, match="axis"):
        function(np.zeros((2, 2), dtype=np.uint8), axis=2)
    with pytest.raises(ValueError, match="axis"):
        function(np.zeros((2, 2), dtype=np.uint8), axis=-3)


def test_lists_are_accepted():
    assert pack_fp4([[1, 2], [3, 4]]).tolist() == [[0x21], [0x43]]
    assert unpack_fp4([0x21]).tolist() == [1, 2]
