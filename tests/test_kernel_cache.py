"""The kernel cache must be keyed on every kernel source, or the import must fail loudly."""
import subprocess
import sys
import threading
import time
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
    files = type("IndexDataCacheFile", (), {"save": lambda self, key, data: None, "load": lambda self, key: None})
    caching = types.SimpleNamespace(CacheImpl=type("CacheImpl", (), {"_locator_classes": ["numba's own"]}),
                                    IndexDataCacheFile=files,
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


def test_numba_without_the_index_file_class_is_an_import_error_naming_its_version():
    class Locator:
        pass

    names = ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")
    caching = types.SimpleNamespace(CacheImpl=type("CacheImpl", (), {"_locator_classes": []}),
                                    **{name: type(name, (Locator,), {}) for name in names})
    with pytest.raises(ImportError, match=r"IndexDataCacheFile.*Numba 0\.99\.2 does not have it"):
        cache._install(types.SimpleNamespace(__version__="0.99.2", core=types.SimpleNamespace(caching=caching)))


def _race_two_saves(tmp_path, monkeypatch, stamp):
    """Two threads save different variants of one function into one fresh index, each pausing after
    it has read the index (the moment another process's save would slip in); returns what each
    key loads back."""
    from numba.core.caching import IndexDataCacheFile

    read_index = IndexDataCacheFile._load_index

    def slow_read(self):
        overloads = read_index(self)
        time.sleep(0.2)
        return overloads

    monkeypatch.setattr(IndexDataCacheFile, "_load_index", slow_read)
    files = [IndexDataCacheFile(str(tmp_path), "loops.loop2-1.py3", stamp) for _ in range(2)]
    threads = [threading.Thread(target=f.save, args=(f"variant {i}", f"code of variant {i}"))
               for i, f in enumerate(files)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.setattr(IndexDataCacheFile, "_load_index", read_index)
    return [files[0].load(f"variant {i}") for i in range(2)]


def test_concurrent_saves_of_different_variants_keep_each_variant_under_its_own_key(tmp_path, monkeypatch):
    """Numba numbers the variants in the index; unlocked, both saves above take number 1 and one key
    then loads the other variant's code. Our kernels' caches are locked, so each key gets its own."""
    stamp = cache.kernel_tree_hash()
    assert _race_two_saves(tmp_path, monkeypatch, stamp) == ["code of variant 0", "code of variant 1"]


def test_the_race_is_real_for_an_unlocked_cache(tmp_path, monkeypatch):
    """The same race on a cache that is not ours (another stamp, no lock): the test above can fail."""
    loaded = _race_two_saves(tmp_path, monkeypatch, b"someone else's stamp")
    assert loaded != ["code of variant 0", "code of variant 1"]
