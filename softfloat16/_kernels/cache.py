"""Make Numba's on-disk cache of every kernel depend on the source of ALL kernel modules.

Numba invalidates a cached function only when its own source file changes. Our loops and the
matmul kernel inline functions from core.py and arith.py, so an edit there would otherwise leave
stale machine code in the cache: silently wrong bits, the one failure this project must not have.
Here each kernel's cache stamp is a hash of every module in this folder instead.

This uses Numba's cache-locator hook (``CacheImpl._locator_classes``); if a Numba version lacks
it, we fall back to Numba's default behaviour rather than fail to import.
"""
import glob
import hashlib
import os

KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))


def kernel_tree_hash() -> bytes:
    """SHA-256 over the names and contents of every .py file in this folder."""
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(KERNEL_DIR, "*.py"))):
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.digest()


def _install() -> None:
    try:
        from numba.core import caching
        bases = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)
        impl = caching.CacheImpl
    except (ImportError, AttributeError):
        return
    stamp = kernel_tree_hash()

    def make(base):
        class KernelTreeLocator(base):
            def get_source_stamp(self):
                return stamp

            @classmethod
            def from_function(cls, py_func, py_file):
                if os.path.dirname(os.path.abspath(py_file)) != KERNEL_DIR:
                    return None
                return super().from_function(py_func, py_file)

        KernelTreeLocator.__name__ = f"KernelTree{base.__name__}"
        return KernelTreeLocator

    if not any(getattr(c, "__name__", "").startswith("KernelTree") for c in impl._locator_classes):
        impl._locator_classes = [make(b) for b in bases] + list(impl._locator_classes)


_install()
