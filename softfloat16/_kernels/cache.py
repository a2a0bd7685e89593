"""Make Numba's on-disk cache of every kernel depend on the source of ALL kernel modules.

Numba invalidates a cached function only when its own source file changes. Our loops and the
matmul kernel inline functions from core.py and arith.py, so an edit there would otherwise leave
stale machine code in the cache: silently wrong bits, the one failure this project must not have.
Here each kernel's cache stamp is a hash of every module in this folder instead.

This uses Numba's cache-locator hook (``CacheImpl._locator_classes``, private). A Numba version
without it makes the import fail with a message naming that version: falling back to Numba's own
stamps would bring back the stale cache this module exists to prevent.
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


_install()
