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

"""The BMC paper's experiments as lab recipes.

A recipe is an OCI image built on this machine from Debian 12 packages
(:mod:`bmc_lab.recipes.build`) whose entrypoint runs one benchmark,
bounded in time, and prints one JSON line with its metric last; and the
``openstack baremetal container sweep`` that runs it over the tunables
the paper compares (:mod:`bmc_lab.recipes.sweep`):

``gemm``
    numpy over OpenBLAS (pthreads), N x N float64 products; ``gflops``.
    Swept with SMT on and off (the paper's HTT table).
``redis``
    redis-server and redis-benchmark (SET, GET) on 127.0.0.1;
    ``requests_per_second``.  Swept with THP ``always`` and ``never``.
``web``
    Apache and ApacheBench on 127.0.0.1; ``requests_per_second``.  Swept
    without and with Receive Flow Steering (the paper's RFS table).
``mpi``
    An MPI ping-pong under Debian's MPICH: one rank per member of a run
    group over the group's NIC, or 2 ranks on one node (shared memory);
    ``latency_us``, lower is better.  No tunables: the baseline only.
"""

import dataclasses
import json
import os

#: Where the entrypoint scripts are (copied into the images).
ENTRYPOINTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'entrypoints')
#: Shared by the shell entrypoints, sourced from this directory.
LIB_DIR = '/usr/local/lib/bmc-recipe'
#: The variable the sweep passes the size in (its --size-env default).
SIZE_ENV = 'BMC_SWEEP_SIZE'
#: The repository of a recipe's image in a registry: bmc/recipe-NAME.
REPO_PREFIX = 'bmc/recipe-'
#: The cell without tunables (the sweep's name for it).
NO_TUNABLES = 'none'

#: RFS as the ``rfs`` profile has it, and on the loopback interface too:
#: the recipe's client and server talk over 127.0.0.1, and the profile's
#: ``*`` means the NICs only (lo has no device).  Loopback packets are
#: steered like any other received packet (netif_rx -> get_rps_cpu).
RFS_WITH_LOOPBACK = json.dumps(
    {'profile': 'rfs', 'rps_cpus': {'lo': 'all'},
     'rps_flow_cnt': {'lo': 32768}}, sort_keys=True)
SMT_ON = json.dumps({'smt': 'on'})
SMT_OFF = json.dumps({'smt': 'off'})


class RecipeError(Exception):
    """A recipe or its arguments are wrong; the message says how."""


@dataclasses.dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    #: Debian 12 packages installed (--no-install-recommends).
    packages: tuple
    #: The entrypoint script (in ENTRYPOINTS) and where it goes.
    script: str
    command: str
    #: The key of the final JSON line the sweep reads.
    metric: str
    #: Default, smallest and largest size (BMC_SWEEP_SIZE), as the
    #: entrypoint checks them.
    default_size: int
    min_size: int
    max_size: int
    #: What one unit of size is (for the docs and the help).
    unit: str
    #: The tunables cells the sweep compares, the baseline first.
    tunables: tuple
    #: Sizes swept in the lab (TCG: small) and on real hardware.
    lab_sizes: tuple
    hardware_sizes: tuple
    #: Seconds a run may take in the lab (the sweep's --timeout).
    run_timeout: int = 1800
    lower_is_better: bool = False
    #: Shell run in the root after the packages are installed (as root,
    #: no network), to configure them.
    setup: str = ''
    #: Extra environment of the image.
    env: tuple = ()
    #: The shared shell library goes in too.
    shell: bool = True
    #: More files of ENTRYPOINTS the image gets: (name, path in the
    #: image) pairs, e.g. a source the setup compiles.
    extra_files: tuple = ()

    @property
    def repo(self):
        return REPO_PREFIX + self.name

    def script_bytes(self):
        return self.source_bytes(self.script)

    @staticmethod
    def source_bytes(name):
        """The content of file ``name`` of ENTRYPOINTS."""
        with open(os.path.join(ENTRYPOINTS, name), 'rb') as f:
            return f.read()

    def files(self):
        """Path in the image -> content, of what the recipe adds (the
        build's inputs hash all of it)."""
        files = {self.command: self.script_bytes()}
        if self.shell:
            files[LIB_DIR + '/common.sh'] = self.source_bytes('common.sh')
        for name, path in self.extra_files:
            files[path] = self.source_bytes(name)
        return files

    def check_size(self, value):
        """``value`` as the entrypoint will read it, or RecipeError."""
        text = str(value).strip()
        if not text.isdigit() or not text.isascii():
            raise RecipeError('%s: the size is %s, a whole number from %d '
                              'to %d; got %r' % (self.name, self.unit,
                                                 self.min_size,
                                                 self.max_size, value))
        size = int(text)
        if not self.min_size <= size <= self.max_size:
            raise RecipeError('%s: the size must be from %d to %d (%s), '
                              'got %d' % (self.name, self.min_size,
                                          self.max_size, self.unit, size))
        return size


GEMM = Recipe(
    name='gemm',
    summary='numpy over OpenBLAS (pthreads): N x N float64 products; '
            'GFLOP/s with SMT on and off (the HTT table)',
    packages=('python3-numpy', 'libopenblas0-pthread',
              'python3-threadpoolctl'),
    script='gemm.py', command='/usr/local/bin/bmc-gemm', metric='gflops',
    default_size=512, min_size=16, max_size=65536,
    unit='N of the N x N matrices',
    tunables=(SMT_ON, SMT_OFF),
    lab_sizes=(512,), hardware_sizes=(4096, 8192),
    # No shell: the entrypoint is Python.
    shell=False,
    # libopenblas0-pthread must be what numpy's libblas.so.3 is.
    setup='update-alternatives --query libblas.so.3-x86_64-linux-gnu '
          '| grep -q "^Value: .*openblas-pthread"')

REDIS = Recipe(
    name='redis',
    summary='redis-server + redis-benchmark (SET, GET) on 127.0.0.1; '
            'requests/s with THP always and never',
    packages=('redis-server', 'redis-tools'),
    script='redis.sh', command='/usr/local/bin/bmc-redis',
    metric='requests_per_second',
    default_size=20000, min_size=1, max_size=100000000,
    unit='requests per test, SET then GET',
    tunables=('thp-always', 'thp-never'),
    lab_sizes=(20000,), hardware_sizes=(1000000,))

WEB = Recipe(
    name='web',
    summary='Apache + ApacheBench (ab -c 4) on 127.0.0.1, a static page; '
            'requests/s without and with RFS',
    packages=('apache2', 'apache2-utils'),
    script='web.sh', command='/usr/local/bin/bmc-web',
    metric='requests_per_second',
    default_size=5000, min_size=1, max_size=100000000,
    unit='HTTP requests',
    tunables=(NO_TUNABLES, RFS_WITH_LOOPBACK),
    lab_sizes=(5000,), hardware_sizes=(200000,),
    # 127.0.0.1:8080 only: the container shares the node's network
    # namespace, and the provisioning network is not the benchmark's.
    setup=r"""
sed -i 's/^Listen 80$/Listen 127.0.0.1:8080/' /etc/apache2/ports.conf
sed -i 's/<VirtualHost \*:80>/<VirtualHost 127.0.0.1:8080>/' \
    /etc/apache2/sites-available/000-default.conf
echo 'ServerName localhost' >/etc/apache2/conf-available/bmc-recipe.conf
a2enconf -q bmc-recipe
grep -q '^Listen 127.0.0.1:8080$' /etc/apache2/ports.conf
test -s /var/www/html/index.html
""")

#: Where the ping-pong's source and program are in the mpi image.
MPI_SOURCE = '/usr/local/src/bmc-mpi/pingpong.c'
MPI_PINGPONG = '/usr/local/bin/bmc-mpi-pingpong'
#: What compiles it, installed for the setup only.
MPI_BUILD_PACKAGES = ('gcc', 'libc6-dev', 'libmpich-dev')

MPI = Recipe(
    name='mpi',
    summary='MPI ping-pong (MPICH): one rank per member of a run group '
            'over its NIC, else 2 ranks on one node; latency in us',
    # mpich: mpiexec (Hydra) and libmpich12 (ch4:ucx); Hydra starts the
    # other members' ranks through ssh and their sshd.  iproute2: each
    # rank finds its own group NIC (``ip addr show to``).
    packages=('mpich', 'openssh-client', 'openssh-server', 'iproute2')
    + MPI_BUILD_PACKAGES,
    script='mpi.sh', command='/usr/local/bin/bmc-mpi', metric='latency_us',
    lower_is_better=True,
    default_size=1000, min_size=1, max_size=1000000,
    unit='timed round trips (after up to 100 untimed)',
    tunables=(NO_TUNABLES,),
    lab_sizes=(1000,), hardware_sizes=(10000, 100000),
    extra_files=(('pingpong.c', MPI_SOURCE),),
    # Compiled against the image's own MPICH, then the compilers go
    # (370 MB of them): what stays must still run the program.
    # No host keys of the package's in the image: every node would share
    # them, and a build's random keys would change the digest; a group's
    # sshd gets its own from the agent.  /run/sshd: sshd refuses to start
    # without it, and nothing else makes it in a container.
    setup=r"""
mpicc -O2 -Wall -Werror -o %(bin)s %(src)s
# What only a "Suggests" keeps goes too (perl, which adduser and debconf
# suggest: 50 MB that the compilers brought).
apt-get purge -y -q --auto-remove \
    -o APT::AutoRemove::SuggestsImportant=false %(build)s
# (set -e does not see a failed "! cmd": these say what they check.
# mpicc is mpich's own, a wrapper that has no compiler to run now.)
for tool in gcc cc; do
    if command -v $tool; then echo "$tool is still there" >&2; exit 1; fi
done
if ldd %(bin)s | grep 'not found'; then exit 1; fi
mpiexec --version | grep -q 'Version: *4\.'
test -x /usr/sbin/sshd
command -v ssh
command -v hostname
command -v ip
rm -f /etc/ssh/ssh_host_*
mkdir -p -m 0755 /run/sshd
""" % {'bin': MPI_PINGPONG, 'src': MPI_SOURCE,
       'build': ' '.join(MPI_BUILD_PACKAGES)})

RECIPES = {r.name: r for r in (GEMM, REDIS, WEB, MPI)}


def get(name):
    try:
        return RECIPES[name]
    except KeyError:
        raise RecipeError('no recipe %r; the recipes are %s'
                          % (name, ', '.join(sorted(RECIPES)))) from None
