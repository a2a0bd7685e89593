"""The host GEMM's operand preparation for small matrices (numpy, no thread launch) against the
threaded Numba kernels it stands in for: B packed into panels, patterns widened by the table."""
import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import linalg, threads
from softfloat16._kernels import hardware

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 16), (16, 17), (5, 33)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_panels_without_threads_equal_the_threaded_packing(shape, dtype):
    b = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    cols = hardware.COLS[np.dtype(dtype)]
    serial, threaded = hardware.panels(b, cols), hardware.panels(b, cols, parallel=True)
    assert serial.shape == threaded.shape == (-(-shape[1] // cols), shape[0], cols)
    assert serial.tobytes() == threaded.tobytes()
    assert (serial[-1, :, shape[1] % cols or cols:] == 0).all()  # the padding past B's last column


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16])
def test_small_and_threaded_widening_agree(fmt, monkeypatch):
    bits = np.arange(1 << 16, dtype=np.uint16).reshape(256, 256)
    small = linalg._binary32(bits[:4, :8], fmt)
    monkeypatch.setattr(threads, "PARALLEL_MIN_ELEMENTS", 0)
    threaded = linalg._binary32(bits, fmt)
    assert small.tobytes() == threaded[:4, :8].tobytes()
    # Against an independent widening (numpy's float16, ml_dtypes' bfloat16), NaNs by class.
    want = bits.view(np.float16 if fmt is sf.fp16 else ml_dtypes.bfloat16).astype(np.float32)
    nan = np.isnan(want)
    assert (np.isnan(threaded) == nan).all()
    assert threaded[~nan].view(np.uint32).tobytes() == want[~nan].view(np.uint32).tobytes()
