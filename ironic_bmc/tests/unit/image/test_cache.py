# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

import multiprocessing
import os
import threading
import time

import pytest

from ironic_bmc.image import cache as cache_mod
from ironic_bmc.image import exceptions as exc

DIGEST = 'sha256:' + 'ab' * 32


def key(n=0):
    return cache_mod.ArtifactCache.make_key(
        f'sha256:{n:064x}', 'erofs', None, 1)


def builder(size=100, delay=0.0, counter=None):
    def _build(workdir):
        if counter is not None:
            with open(counter, 'a') as f:
                f.write('built\n')
        time.sleep(delay)
        with open(os.path.join(workdir, 'artifact'), 'wb') as f:
            f.write(b'x' * size)
        return {'size': size}
    return _build


def _process_build(cache_dir, counter, barrier):
    barrier.wait()
    cache = cache_mod.ArtifactCache(cache_dir)
    entry, _ = cache.get_or_build(key(), builder(delay=0.5,
                                                 counter=counter))
    assert os.path.getsize(entry.artifact) == 100


def test_make_key():
    assert key(1) == f'sha256-{1:064x}-erofs-none-v1'
    with pytest.raises(ValueError):
        cache_mod.ArtifactCache.make_key('sha256:../../etc', 'erofs')


def test_build_once_then_hit(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path))
    entry, built = cache.get_or_build(key(), builder())
    assert built
    assert entry.meta['size'] == 100 and entry.meta['key'] == key()
    entry2, built2 = cache.get_or_build(key(), builder(size=5))
    assert not built2
    assert os.path.getsize(entry2.artifact) == 100
    assert cache.lookup(key()).artifact == entry.artifact


def test_failed_build_leaves_nothing(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path))
    cache.get_or_build(key(1), builder())

    def _fail(workdir):
        os.makedirs(os.path.join(workdir, 'tree/deep'))
        with open(os.path.join(workdir, 'artifact'), 'wb') as f:
            f.write(b'half')
        raise exc.ArtifactBuildError(format='erofs', reason='boom')

    with pytest.raises(exc.ArtifactBuildError):
        cache.get_or_build(key(2), _fail)
    assert cache.lookup(key(2)) is None
    assert os.listdir(cache.work_dir) == []
    assert sorted(os.listdir(cache.entries_dir)) == [key(1)]
    assert cache.lookup(key(1)) is not None


def test_build_without_artifact_is_an_error(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path))
    with pytest.raises(exc.CacheError):
        cache.get_or_build(key(), lambda workdir: {})
    assert os.listdir(cache.entries_dir) == []


def test_leftover_work_dir_removed(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path))
    os.makedirs(os.path.join(cache.work_dir, key() + '.crashed/tree'))
    cache.get_or_build(key(), builder())
    assert os.listdir(cache.work_dir) == []


def test_threads_build_once(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path))
    counter = str(tmp_path / 'counter')
    results = []

    def _run():
        results.append(cache.get_or_build(
            key(), builder(delay=0.3, counter=counter)))

    threads = [threading.Thread(target=_run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(counter) as f:
        assert f.read().count('built') == 1
    assert sorted(built for _, built in results) == [False] * 3 + [True]


def test_processes_build_once(tmp_path):
    ctx = multiprocessing.get_context('fork')
    counter = str(tmp_path / 'counter')
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_process_build,
                         args=(str(tmp_path / 'c'), counter, barrier))
             for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with open(counter) as f:
        assert f.read().count('built') == 1


def _age(cache, k, seconds):
    stamp = os.path.join(cache.entries_dir, k, cache_mod.STAMP_NAME)
    t = time.time() - seconds
    os.utime(stamp, (t, t))


def test_lru_eviction(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path), max_size=2000)
    cache.get_or_build(key(1), builder(size=800))
    cache.get_or_build(key(2), builder(size=800))
    _age(cache, key(1), 100)
    _age(cache, key(2), 200)
    cache.lookup(key(2))       # a use makes 2 the most recent
    cache.get_or_build(key(3), builder(size=800))
    assert cache.lookup(key(1)) is None
    assert cache.lookup(key(2)) is not None
    assert cache.lookup(key(3)) is not None
    assert cache.total_size() <= 2000


def test_pinned_entry_not_evicted(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path), max_size=1000)
    entry, _ = cache.get_or_build(key(1), builder(size=800), pin='node-1')
    assert cache.pins(key(1)) == ['node-1']
    _age(cache, key(1), 100)
    cache.get_or_build(key(2), builder(size=800))
    # 1 is older but pinned; 2 was just built and is over the limit too,
    # the oldest unpinned entry goes.  (Looking without touching: a use
    # would make 1 the most recent.)
    assert cache.lookup(key(1), touch=False) is not None
    assert os.path.exists(entry.artifact)
    cache.unpin(key(1), 'node-1')
    assert cache.evict() == [key(1)]
    assert cache.lookup(key(1)) is None


def test_pinned_context_and_unpin_all(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path), max_size=0)
    cache.get_or_build(key(1), builder(), pin='n1')
    cache.pin(key(1), 'n2')
    with cache.pinned(key(1), 'ctx') as entry:
        assert entry.key == key(1)
        assert cache.evict() == []
    cache.get_or_build(key(2), builder(), pin='n3')
    assert cache.holders() == {'n1', 'n2', 'n3'}
    cache.unpin_all('n1')
    assert cache.pins(key(1)) == ['n2']
    assert cache.holders() == {'n2', 'n3'}
    cache.unpin(key(2), 'n3')
    assert cache.evict() == [key(2)]
    cache.unpin(key(1), 'n2')
    assert cache.evict() == [key(1)]
    with pytest.raises(exc.CacheError):
        cache.pin(key(1), 'n1')
    with pytest.raises(ValueError):
        cache.pin(key(1), '../x')


def test_hardlinked_artifact_not_evicted(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path / 'c'), max_size=0)
    entry, _ = cache.get_or_build(key(1), builder())
    os.link(entry.artifact, tmp_path / 'staged')
    assert cache.evict() == []
    os.unlink(tmp_path / 'staged')
    assert cache.evict() == [key(1)]


def test_entry_being_built_not_evicted(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path), max_size=0)
    cache.get_or_build(key(1), builder())
    with cache_mod._flock(cache._lock_path(key(1))):
        assert cache.evict() == []
    assert cache.evict() == [key(1)]


def test_readonly_tree_cleanup(tmp_path):
    cache = cache_mod.ArtifactCache(str(tmp_path))

    def _build(workdir):
        ro = os.path.join(workdir, 'tree', 'ro')
        os.makedirs(ro)
        open(os.path.join(ro, 'f'), 'w').close()
        os.chmod(ro, 0o555)
        raise RuntimeError('fail')

    with pytest.raises(RuntimeError):
        cache.get_or_build(key(), _build)
    assert os.listdir(cache.work_dir) == []


def test_stale_work_removed_unless_a_build_holds_it(tmp_path):
    c = cache_mod.ArtifactCache(str(tmp_path / 'c'))
    key_dead = c.make_key('sha256:' + 'd' * 64, 'erofs')
    key_live = c.make_key('sha256:' + 'e' * 64, 'erofs')
    for key in (key_dead, key_live):
        work = os.path.join(c.work_dir, key + '.x1y2z3')
        os.makedirs(os.path.join(work, 'tree', 'usr'))
    # A build of key_live is in progress (it holds the key's lock).
    with cache_mod._flock(c._lock_path(key_live)):
        removed = c.clean_stale_work()
    assert removed == [key_dead + '.x1y2z3']
    assert os.listdir(c.work_dir) == [key_live + '.x1y2z3']


def _tree_build(size):
    def build(work):
        tree = os.path.join(work, 'artifact')
        os.makedirs(os.path.join(tree, 'sub'))
        with open(os.path.join(tree, 'sub', 'f'), 'wb') as f:
            f.write(b'x' * size)
        return {'format': 'tree', 'size': size}
    return build


def test_tree_entries_are_sized_by_their_files_and_evictable(tmp_path):
    """A directory artifact (nfs mode) counts with its recorded size and
    is held by pins only (a directory always has several links)."""
    cache = cache_mod.ArtifactCache(str(tmp_path))
    cache.get_or_build('t1', _tree_build(1000), pin='n1')
    assert cache.total_size() == 1000 + os.path.getsize(
        os.path.join(cache.entries_dir, 't1', 'meta.json'))
    assert cache.evict(max_size=0) == []      # pinned
    cache.unpin('t1', 'n1')
    assert cache.evict(max_size=0) == ['t1']
    assert cache.lookup('t1') is None
