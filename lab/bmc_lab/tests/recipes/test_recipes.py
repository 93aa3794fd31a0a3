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

"""The lab recipes for real, without the lab: each image built from the
Debian mirror (or found in the recipe cache), its entrypoint run on this
machine in its root, then the image pushed to a docker-registry and made
into the conductor's erofs artifact, and the entrypoint run again in
what that artifact holds.

``tox -e recipes`` runs it (not CI: building the images from the
Debian mirror takes minutes).  With the three images in the recipe
cache (``BMC_RECIPE_CACHE``, /var/tmp/bmc-recipes; ``bmc-lab recipe
build`` puts them there) it takes about 20 seconds; from an empty cache
about three minutes more.  Needs root (debootstrap, chroot, namespaces).
"""

import subprocess

import pytest

from ironic_bmc.image import cache as cache_mod
from ironic_bmc.image import pipeline
from bmc_lab import recipes
from bmc_lab.recipes import build
from bmc_lab.tests.functional import registry_fixture


#: Small sizes: seconds per run here.
SMALL = {'gemm': 256, 'redis': 2000, 'web': 500}


@pytest.fixture(scope='module')
def builder():
    return build.Builder()


@pytest.fixture(scope='module')
def registry():
    if not registry_fixture.DockerRegistry.available():
        pytest.skip('needs /usr/bin/docker-registry')
    with registry_fixture.DockerRegistry() as reg:
        yield reg


def _metric(recipe, code, stdout, stderr):
    assert code == 0, stderr
    result = build.final_json(stdout)
    assert result is not None, stdout[-2000:]
    assert sum(1 for line in stdout.splitlines()
               if line.lstrip().startswith('{')) == 1
    assert result['metric'] == recipe.metric
    assert result[recipe.metric] > 0
    return result


@pytest.mark.parametrize('name', sorted(recipes.RECIPES))
def test_recipe_runs(builder, registry, tmp_path, name):
    recipe = recipes.get(name)
    done = builder.build(recipe)
    # Built again with nothing changed: the cache, the same image.
    again = builder.build(recipe)
    assert again.cached and again.image.digest == done.image.digest

    result = _metric(recipe, *build.run(done, size=SMALL[name],
                                        timeout=300))
    assert result['n'] == SMALL[name]
    code, stdout, stderr = build.run(done, size='12x', timeout=60)
    assert code == 2
    assert stderr.startswith('bmc-%s: BMC_SWEEP_SIZE must be' % name)
    assert build.final_json(stdout) is None

    # The image as the conductor makes it into the node's root.
    ref = build.push(done, registry.address)
    cache = cache_mod.ArtifactCache(str(tmp_path / 'cache'),
                                    max_size=4 << 30)
    artifact = pipeline.prepare_rootfs(ref, cache, cpu_arch='x86_64',
                                       fmt='erofs', insecure=True)
    assert artifact.config.command == [recipe.command]
    tree = tmp_path / 'tree'
    subprocess.run(['fsck.erofs', '--extract=%s' % tree, artifact.path],
                   check=True, capture_output=True)
    assert (tree / recipe.command.lstrip('/')).exists()
    _metric(recipe, *build.run(done, size=SMALL[name], timeout=300,
                               rootfs=str(tree)))
