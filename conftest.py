"""Collection rules for the whole checkout (pytest reads this before tests/conftest.py)."""
import os

try:
    import torch  # noqa: F401
except ImportError:  # torch is an optional extra: the dispatch mode and its page need it
    collect_ignore = ["softfloat16/torch", "docs/torch.md"]

#: ``pytest -n auto`` starts one worker per core up to this many: each worker holds numpy, Numba,
#: torch and its compiled kernels (about 1 GB), and past 8 the shared kernel cache, not the cores,
#: limits a cold run.
MAX_AUTO_WORKERS = 8


def pytest_xdist_auto_num_workers(config):
    """The worker count of ``-n auto`` (pytest-xdist): the usable cores, at most MAX_AUTO_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_AUTO_WORKERS))
