#!/usr/bin/python3
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

"""The ``gemm`` recipe's workload: N x N float64 matrix products with
numpy over OpenBLAS (pthreads), the BMC paper's HTT experiment.

One untimed product warms the library (its threads, the pages of the
result), then up to ``BMC_GEMM_REPEAT`` timed products run, stopping
early once ``BMC_BENCH_SECONDS`` have gone by (at least one always runs).
The last line of the output is one JSON object; its ``gflops`` is
``2 N^3`` times the timed products over their total time (higher is
better).

Environment: ``BMC_SWEEP_SIZE`` (N, default 512), ``BMC_GEMM_REPEAT``
(default 5), ``BMC_BENCH_SECONDS`` (default 300), ``OPENBLAS_CORETYPE``
(OpenBLAS's own: force its kernels; see :func:`choose_core`).  A bad
value, matrices that do not fit in the memory available, a BLAS that is
not OpenBLAS or one that fails here end the run with a message on stderr
and exit status 2.

This file is copied into the image as /usr/local/bin/bmc-gemm and runs on
the image's python3 (Debian 12: 3.11); it imports only the standard
library until the size is checked.
"""

import json
import os
import signal
import subprocess
import sys
import time

PROG = 'bmc-gemm'
SIZE_ENV = 'BMC_SWEEP_SIZE'
DEFAULT_N = 512
MIN_N, MAX_N = 16, 65536
DEFAULT_REPEAT = 5
DEFAULT_SECONDS = 300
#: Three N x N float64 matrices live at once (a, b and the product).
MATRICES = 3
#: OpenBLAS's generic x86-64 kernels (SSE3): what any x86-64 CPU runs.
GENERIC_CORE = 'Prescott'
PROBE = ('import numpy; a = numpy.ones((64, 64)); '
         'assert (a @ a)[0, 0] == 64')


class Refused(Exception):
    """Bad input or an unfit machine: the message says which."""


def whole(env, name, default, low, high):
    """``env[name]`` as a whole number in [low, high], else Refused."""
    text = env.get(name)
    if text is None or text.strip() == '':
        return default
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        raise Refused('%s must be a whole number from %d to %d, got %r'
                      % (name, low, high, text))
    value = int(text)
    if not low <= value <= high:
        raise Refused('%s must be from %d to %d, got %d'
                      % (name, low, high, value))
    return value


def settings(env):
    """(n, repeat, seconds) from the environment."""
    return (whole(env, SIZE_ENV, DEFAULT_N, MIN_N, MAX_N),
            whole(env, 'BMC_GEMM_REPEAT', DEFAULT_REPEAT, 1, 1000),
            whole(env, 'BMC_BENCH_SECONDS', DEFAULT_SECONDS, 1, 86400))


def mem_available(path='/proc/meminfo'):
    """MemAvailable in bytes, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(n, available):
    need = MATRICES * 8 * n * n
    if available is not None and need > available:
        raise Refused('%d x %d float64 matrices need %d MiB, %d MiB are '
                      'available: give a smaller %s'
                      % (n, n, need >> 20, available >> 20, SIZE_ENV))


def read_first(path, default='unknown'):
    try:
        with open(path) as f:
            return f.read().strip() or default
    except OSError:
        return default


def probe(env, timeout=300):
    """Exit status of a small product in a child (negative: a signal)."""
    try:
        return subprocess.run([sys.executable, '-c', PROBE], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return None


def choose_core(env, run_probe=probe):
    """The OPENBLAS_CORETYPE to force, or None (OpenBLAS's own choice).

    OpenBLAS picks its kernels from the CPU's identity.  On QEMU's
    ``qemu64`` CPU model (the lab's nodes: "AuthenticAMD", family 15)
    0.3.21 picks its Opteron kernels, which use instructions that model
    lacks: the product dies of SIGILL.  Then its generic kernels are
    forced, and the result says so.  An OPENBLAS_CORETYPE given is kept.
    """
    if env.get('OPENBLAS_CORETYPE'):
        return None
    status = run_probe(env)
    if status == 0:
        return None
    if status == -signal.SIGILL:
        status = run_probe(dict(env, OPENBLAS_CORETYPE=GENERIC_CORE))
        if status == 0:
            return GENERIC_CORE
    raise Refused('a %d x %d product with numpy fails on this machine (%s)'
                  % (64, 64, 'timed out' if status is None
                     else 'signal %d' % -status if status < 0
                     else 'exit status %d' % status))


def blas_info(pools):
    """The OpenBLAS pool of threadpoolctl's ``threadpool_info()``."""
    for pool in pools:
        if pool.get('internal_api') == 'openblas':
            return pool
    found = ', '.join(p.get('filepath', '?') for p in pools)
    raise Refused('numpy does not use OpenBLAS here (%s): the image must '
                  'have libopenblas0-pthread as libblas.so.3'
                  % (found or 'no BLAS found'))


def blas_name(pool):
    return '%s %s %s' % (pool.get('internal_api'), pool.get('version'),
                         pool.get('threading_layer'))


def result(n, times, pool, cpus, smt, forced=None):
    """The final JSON object."""
    total = sum(times)
    flops = 2.0 * n ** 3
    return {
        'metric': 'gflops',
        'gflops': round(flops * len(times) / total / 1e9, 3),
        'gflops_best': round(flops / min(times) / 1e9, 3),
        'n': n, 'repeats': len(times), 'seconds': round(total, 4),
        'threads': pool.get('num_threads'),
        'blas': blas_name(pool),
        'blas_arch': pool.get('architecture'),
        'blas_core_forced': forced,
        'cpus_online': cpus, 'smt': smt}


def main(env=None, run_probe=probe):
    env = os.environ if env is None else env
    try:
        n, repeat, budget = settings(env)
        check_memory(n, mem_available())
        forced = choose_core(dict(env), run_probe)
        if forced:
            print('%s: OpenBLAS\'s kernels for this CPU stop on an illegal '
                  'instruction (an emulated CPU?): using its generic ones, '
                  'OPENBLAS_CORETYPE=%s' % (PROG, forced), flush=True)
            # Read by OpenBLAS when numpy loads it, just below.
            os.environ['OPENBLAS_CORETYPE'] = forced
        import numpy
        import threadpoolctl
        pool = blas_info(threadpoolctl.threadpool_info())
    except Refused as exc:
        print('%s: %s' % (PROG, exc), file=sys.stderr)
        return 2
    smt = read_first('/sys/devices/system/cpu/smt/control')
    cpus = os.cpu_count()
    print('%s: N=%d, up to %d products in %d s, %s with %s threads '
          '(%s CPUs online, SMT %s)'
          % (PROG, n, repeat, budget, blas_name(pool),
             pool.get('num_threads'), cpus, smt), flush=True)
    rng = numpy.random.default_rng(20240101)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    c = numpy.empty((n, n))
    numpy.matmul(a, b, out=c)
    times = []
    deadline = time.monotonic() + budget
    while len(times) < repeat:
        start = time.perf_counter()
        numpy.matmul(a, b, out=c)
        times.append(time.perf_counter() - start)
        if time.monotonic() >= deadline:
            print('%s: %d s spent (BMC_BENCH_SECONDS), stopping after %d '
                  'products' % (PROG, budget, len(times)), flush=True)
            break
    print(json.dumps(result(n, times, pool, cpus, smt, forced),
                     sort_keys=True), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
