"""Compile notices: a cold first run says at once that it is compiling; a warm one says nothing."""
import io
import subprocess
import sys
import textwrap

import numba

from softfloat16.compiling import CompileNotices

PROGRAM = textwrap.dedent("""
    import sys
    sys.path.insert(0, {folder!r})
    from softfloat16.compiling import CompileNotices
    with CompileNotices(sys.stdout, label="[probe] ", every=0):
        import probe_kernels
        print("result", probe_kernels.double(21))
""")


def _run(folder, cache):
    done = subprocess.run([sys.executable, "-c", PROGRAM.format(folder=str(folder))], capture_output=True,
                          text=True, env={"NUMBA_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_a_cold_process_prints_a_notice_and_a_warm_one_prints_nothing(tmp_path):
    (tmp_path / "probe_kernels.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef double(x):\n    return 2 * x\n")
    cold = _run(tmp_path, tmp_path / "cache")
    assert cold[0].startswith("[probe] compiling kernels for their first use on this machine"), cold
    assert cold[-1] == "result 42"
    warm = _run(tmp_path, tmp_path / "cache")
    assert warm == ["result 42"]


def test_lines_are_throttled_and_count_every_compilation():
    stream = io.StringIO()
    with CompileNotices(stream, every=3600) as notices:
        for k in range(3):
            numba.njit(lambda x, k=k: x + k)(1)
    assert notices.compiled == 3
    assert len(stream.getvalue().splitlines()) == 1  # the first line only: the others come within the hour


def test_after_the_block_nothing_is_counted():
    with CompileNotices(io.StringIO()) as notices:
        pass
    numba.njit(lambda x: x - 1)(1)
    assert notices.compiled == 0
