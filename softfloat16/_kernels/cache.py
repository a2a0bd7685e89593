"""Make Numba's on-disk cache of every kernel depend on the source of ALL kernel modules.

Numba invalidates a cached function only when its own source file changes. Our loops and the
matmul kernel inline functions from core.py and arith.py, so an edit there would otherwise leave
stale machine code in the cache: silently wrong bits, the one failure this project must not have.
Here each kernel's cache stamp is a hash of every module in this folder instead.

This uses Numba's cache-locator hook (``CacheImpl._locator_classes``, private). A Numba version
without it makes the import fail with a message naming that version: falling back to Numba's own
stamps would bring back the stale cache this module exists to prevent.

Several processes may fill one cache at once (the report's worker processes, parallel test workers).
Numba numbers a function's cached variants in one index file: two processes saving different
variants at the same moment can both take number 1, and the index then names one variant while the
data file holds the other, which a later process would load and run on the wrong argument types.
So saving and loading an entry of these kernels hold an exclusive lock on a file beside the index.
"""
import contextlib
import glob
import hashlib
import os

try:
    import fcntl
except ImportError:  # not POSIX: a lock directory instead (mkdir is atomic everywhere)
    fcntl = None

KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))


def kernel_tree_hash() -> bytes:
    """SHA-256 over the names and contents of every .py file in this folder."""
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(KERNEL_DIR, "*.py"))):
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.digest()


@contextlib.contextmanager
def index_lock(index_path: str):
    """Hold the exclusive lock of the cache index at ``index_path`` (all processes of the machine).
    Its folder exists: Numba makes the cache folder before it saves or loads an entry."""
    if fcntl is not None:
        with open(index_path + ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return
    import time
    folder = index_path + ".lockdir"
    for _ in range(6000):  # a minute at most, then a clear error rather than a wait forever
        try:
            os.mkdir(folder)
            break
        except FileExistsError:
            time.sleep(0.01)
    else:
        raise RuntimeError(f"the kernel cache index {index_path} stayed locked for a minute; "
                           f"remove {folder} if no other process is compiling")
    try:
        yield
    finally:
        os.rmdir(folder)


def _lock_index_files(files, stamp: bytes) -> None:
    """Wrap ``files.save`` and ``files.load`` (Numba's IndexDataCacheFile) so that, for the caches
    stamped with ``stamp`` (ours), each runs under :func:`index_lock`; other caches are untouched."""
    if getattr(files.save, "kernel_tree_locked", False):
        return
    save, load = files.save, files.load

    def locked(method):
        def run(self, key, *data):
            if self._source_stamp != stamp:
                return method(self, key, *data)
            with index_lock(self._index_path):
                return method(self, key, *data)
        run.kernel_tree_locked = True
        run.__name__ = method.__name__
        return run

    files.save, files.load = locked(save), locked(load)


def _install(numba_module=None) -> None:
    """Put a KernelTree locator in front of each of Numba's; ``numba_module`` (default: numba) lets
    the tests hand in a stand-in without the hook."""
    import numba.core.caching  # binds numba, with the submodule read below loaded
    numba_module = numba_module or numba
    caching = getattr(getattr(numba_module, "core", None), "caching", None)
    impl = getattr(caching, "CacheImpl", None)
    if not hasattr(impl, "_locator_classes"):
        version = getattr(numba_module, "__version__", "of unknown version")
        raise ImportError(
            f"softfloat16 needs Numba's cache-locator hook (numba.core.caching.CacheImpl._locator_classes) "
            f"to key its kernel cache on every kernel source, and Numba {version} does not have it. Without "
            "it a cached kernel could outlive an edit of the code it inlines and give wrong bits. Install a "
            "Numba that has it (0.68 does)."
        )
    # public names from Numba 0.62; the same classes carry a leading underscore before that
    bases = {name: getattr(caching, name, None) or getattr(caching, "_" + name)
             for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")}
    stamp = kernel_tree_hash()

    def make(name, base):
        class KernelTreeLocator(base):
            def get_source_stamp(self):
                return stamp

            @classmethod
            def from_function(cls, py_func, py_file):
                if os.path.dirname(os.path.abspath(py_file)) != KERNEL_DIR:
                    return None
                return super().from_function(py_func, py_file)

        KernelTreeLocator.__name__ = f"KernelTree{name}"
        return KernelTreeLocator

    if not any(getattr(c, "__name__", "").startswith("KernelTree") for c in impl._locator_classes):
        impl._locator_classes = [make(name, base) for name, base in bases.items()] + list(impl._locator_classes)
    files = getattr(caching, "IndexDataCacheFile", None)
    if not (hasattr(files, "save") and hasattr(files, "load")):
        raise ImportError(
            f"softfloat16 locks Numba's cache index (numba.core.caching.IndexDataCacheFile) while it saves "
            f"a kernel, and Numba {getattr(numba_module, '__version__', 'of unknown version')} does not have "
            "it: processes compiling at once could mix up cached kernels. Install a Numba that has it (0.68 does)."
        )
    _lock_index_files(files, stamp)


_install()
