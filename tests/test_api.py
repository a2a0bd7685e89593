"""The public API contract (docs/softfloat16.md): names, argument handling, shapes, dtypes, errors."""
import os
import subprocess
import sys

import numpy as np
import pytest

import softfloat16 as sf


def test_format_objects_and_lookup():
    assert (sf.fp16.exponent_bits, sf.fp16.fraction_bits, sf.fp16.bias, sf.fp16.width) == (5, 10, 15, 16)
    assert (sf.bf16.exponent_bits, sf.bf16.fraction_bits, sf.bf16.bias, sf.bf16.width) == (8, 7, 127, 16)
    assert (sf.fp32.exponent_bits, sf.fp32.fraction_bits, sf.fp32.bias, sf.fp32.width) == (8, 23, 127, 32)
    assert sf.fp16.dtype is np.uint16 and sf.bf16.dtype is np.uint16 and sf.fp32.dtype is np.uint32
    for name, fmt in [("fp16", sf.fp16), ("float16", sf.fp16), ("half", sf.fp16), ("bf16", sf.bf16),
                      ("bfloat16", sf.bf16), ("fp32", sf.fp32), ("float32", sf.fp32), ("FP16", sf.fp16)]:
        assert sf.format(name) is fmt
    with pytest.raises(ValueError, match="format.*'fp12'.*accepted"):
        sf.format("fp12")


def test_scalars_give_numpy_scalars_and_arrays_keep_shape():
    r = sf.fp16.add(0x3C00, 0x3C00)
    assert isinstance(r, np.uint16) and r == 0x4000
    r, fl = sf.fp16.add(0x3C00, 0x3C00, flags=True)
    assert isinstance(fl, np.uint8) and fl == 0
    a = np.full((2, 3), 0x3C00, np.uint16)
    assert sf.fp16.mul(a, a).shape == (2, 3)
    assert sf.fp16.eq(a, a).dtype == np.bool_


def test_broadcasting_like_numpy():
    a = np.array([[0x3C00], [0x4000]], np.uint16)          # [[1], [2]]
    b = np.array([0x3C00, 0x4000, 0x4200], np.uint16)      # [1, 2, 3]
    got = sf.fp16.mul(a, b)
    want = (a.view(np.float16) * b.view(np.float16)).view(np.uint16)
    assert got.shape == (2, 3) and np.array_equal(got, want)
    assert sf.fp16.fma(a, b, 0x3C00).shape == (2, 3)
    with pytest.raises(ValueError, match=r"broadcast.*a\(2,\).*b\(3,\)"):
        sf.fp16.add(np.zeros(2, np.uint16), b)


def test_float_arrays_are_read_as_bits():
    x = np.array([1.5, -2.0], np.float16)
    assert np.array_equal(sf.fp16.add(x, x), (x + x).view(np.uint16))
    y = np.array([1.5, -2.0], np.float32)
    assert np.array_equal(sf.fp32.mul(y, y), (y * y).view(np.uint32))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    z = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    assert np.array_equal(sf.bf16.add(z, z), (z + z).view(np.uint16))


@pytest.mark.parametrize("bad", [np.array([1.0], np.float32), np.array([1.0]), np.array([True])])
def test_float_arrays_of_the_wrong_width_are_refused(bad):
    with pytest.raises(TypeError, match="a:.*fp16"):
        sf.fp16.add(bad, np.uint16(0))


def test_integer_operands_must_fit():
    assert sf.fp16.add(np.int32(0x3C00), np.int64(0)) == 0x3C00
    assert sf.fp16.add(np.int16(-17408), 0) == 0xBC00      # int16 storage of 0xBC00 is reinterpreted
    with pytest.raises(ValueError, match="b: value 65536"):
        sf.fp16.add(0, 65536)
    with pytest.raises(ValueError, match="a: value -1"):
        sf.fp16.add(-1, 0)


def test_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="rounding.*'nearest-ish'.*rne"):
        sf.fp16.add(0, 0, rounding="nearest-ish")
    with pytest.raises(ValueError, match="nan.*'vax'.*x86"):
        sf.fp16.add(0, 0, nan="vax")
    with pytest.raises(ValueError, match="tininess.*'never'"):
        sf.fp16.add(0, 0, tininess="never")
    with pytest.raises(TypeError, match="ftz"):
        sf.fp16.add(0, 0, ftz="yes")
    with pytest.raises(TypeError, match="unknown keyword.*roundng"):
        sf.fp16.add(0, 0, roundng="rtz")
    with pytest.raises(ValueError, match="format"):
        sf.convert(0, src="fp16", dst="fp64")


def test_rounding_aliases_and_enum():
    assert sf.fp16.add(0x3C00, 0x0001, rounding="toward_positive") == 0x3C01
    assert sf.fp16.add(0x3C00, 0x0001, rounding=sf.Rounding.RUP) == 0x3C01


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_from_float_accepts_float_and_int_inputs_and_to_float_is_exact():
    x = np.array([0.1, -3.0, 1e-8, 7e4])   # 7e4 overflows to inf
    assert np.array_equal(sf.fp16.from_float(x), x.astype(np.float16).view(np.uint16))
    x32 = x.astype(np.float32)
    assert np.array_equal(sf.fp16.from_float(x32), x32.astype(np.float16).view(np.uint16))
    assert sf.fp16.from_float(np.int64(2049)) == np.float16(2048).view(np.uint16)   # ties to even
    assert sf.fp16.from_float(3) == 0x4200
    all16 = np.arange(1 << 16, dtype=np.uint16)
    values = sf.fp16.to_float(all16)
    finite = ~np.isnan(all16.view(np.float16))
    assert values.dtype == np.float64
    assert np.array_equal(values[finite], all16.view(np.float16)[finite].astype(np.float64))
    assert isinstance(sf.fp16.to_float(0x3C00), np.float64)
    with pytest.raises(TypeError):
        sf.fp16.from_float(np.array(["1.0"]))


def test_flag_values_and_names():
    assert [f.name for f in sf.Flag] == ["INEXACT", "UNDERFLOW", "OVERFLOW", "DIVIDE_BY_ZERO", "INVALID"]
    _, fl = sf.fp16.mul(0x7BFF, 0x7BFF, flags=True)
    assert sf.Flag(fl) == sf.Flag.OVERFLOW | sf.Flag.INEXACT


def test_same_bits_whatever_the_thread_count():
    code = ("import numpy as np, hashlib, softfloat16 as sf; rng = np.random.default_rng(0); "
            "a = rng.integers(0, 1 << 16, 1 << 18, dtype=np.uint16); "
            "b = rng.integers(0, 1 << 16, 1 << 18, dtype=np.uint16); "
            "h = hashlib.sha256(); [h.update(getattr(sf.fp16, op)(a, b).tobytes()) for op in ('add', 'mul', 'div')]; "
            "h.update(sf.fp16.fma(a, b, a).tobytes()); print(h.hexdigest())")
    digests = set()
    for threads in ("1", "2"):
        env = dict(os.environ, NUMBA_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_second_process_loads_compiled_kernels_from_the_cache(tmp_path):
    """cache=True must hold across processes: the second run loads, it does not compile again."""
    code = "import numpy as np, softfloat16 as sf; a = np.ones(4, np.uint16); sf.fp16.mul(a, a, rounding='rtz')"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), NUMBA_DEBUG_CACHE="1")
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert "data saved" in runs[0]
    assert "data loaded" in runs[1] and "data saved" not in runs[1]


def test_kernel_caches_are_keyed_on_all_kernel_sources():
    """Loops inline core.py/arith.py: their cache stamp must cover those files, not only loops.py."""
    from softfloat16._kernels import cache, loops
    loop = loops.make_loop("add", 5, 10)
    locator = loop._cache._impl.locator
    assert type(locator).__name__.startswith("KernelTree")
    assert locator.get_source_stamp() == cache.kernel_tree_hash()
