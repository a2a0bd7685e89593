"""The kernel cache must be keyed on every kernel source, or the import must fail loudly."""
import subprocess
import sys
import types

import pytest

from softfloat16._kernels import cache


def test_numba_without_the_cache_hook_is_an_import_error_naming_its_version():
    caching = types.SimpleNamespace(CacheImpl=type("CacheImpl", (), {}))  # no _locator_classes
    fake_numba = types.SimpleNamespace(__version__="0.99.1", core=types.SimpleNamespace(caching=caching))
    with pytest.raises(ImportError, match=r"CacheImpl\._locator_classes.*Numba 0\.99\.1 does not have it"):
        cache._install(fake_numba)


def test_the_locators_of_numba_before_0_62_are_found_under_their_underscored_names():
    """Numba 0.59-0.61 name the locator classes with a leading underscore; the hook is the same."""
    class Locator:
        @classmethod
        def from_function(cls, py_func, py_file):
            return cls()

    names = ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")
    caching = types.SimpleNamespace(CacheImpl=type("CacheImpl", (), {"_locator_classes": ["numba's own"]}),
                                    **{"_" + name: type("_" + name, (Locator,), {}) for name in names})
    cache._install(types.SimpleNamespace(__version__="0.59.0", core=types.SimpleNamespace(caching=caching)))
    installed = caching.CacheImpl._locator_classes
    assert [c.__name__ for c in installed[:3]] == ["KernelTree" + name for name in names]
    assert [c.__mro__[1] for c in installed[:3]] == [getattr(caching, "_" + name) for name in names]
    assert installed[3:] == ["numba's own"]
    assert installed[0].from_function(None, cache.__file__) is not None  # a kernel file: located
    assert installed[0].from_function(None, __file__) is None             # any other file: not ours


def test_importing_softfloat16_fails_when_the_hook_is_gone():
    """The same through a real import: no silent fall-back to Numba's own (stale) cache stamps."""
    code = "import numba.core.caching as c; del c.CacheImpl._locator_classes; import softfloat16"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "_locator_classes" in done.stderr, done.stderr[-2000:]


def test_installing_twice_adds_the_locators_once():
    from numba.core import caching
    before = list(caching.CacheImpl._locator_classes)
    cache._install()
    assert caching.CacheImpl._locator_classes == before
    assert [c.__name__ for c in before[:3]] == [
        "KernelTreeUserProvidedCacheLocator", "KernelTreeInTreeCacheLocator", "KernelTreeUserWideCacheLocator"]
