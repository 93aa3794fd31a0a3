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

"""Parse container image references.

Accepted forms (an optional ``oci://`` or ``docker://`` prefix is
stripped)::

    registry.example:5000/ns/repo:tag
    registry.example:5000/ns/repo@sha256:<64 hex>
    registry.example:5000/ns/repo:tag@sha256:<64 hex>
    ns/repo:tag          (Docker Hub, as docker does)
    repo                 (docker.io/library/repo:latest)
"""

import dataclasses
import re

from ironic_bmc.image import exceptions as exc

DEFAULT_REGISTRY = 'docker.io'
#: The API host of Docker Hub.
DOCKER_HUB_API = 'registry-1.docker.io'
DEFAULT_TAG = 'latest'
#: The distribution spec's bound on a name (registry and repository), and
#: on a whole reference (the name, a 128-character tag and a digest).
MAX_NAME = 255
MAX_REFERENCE = MAX_NAME + 1 + 128 + 1 + len('sha256:') + 64

_COMPONENT = r'[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*'
_REPO_RE = re.compile(rf'^{_COMPONENT}(?:/{_COMPONENT})*$')
_TAG_RE = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$')
DIGEST_RE = re.compile(r'^sha256:[a-f0-9]{64}$')
_HOST_RE = re.compile(
    r'^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?'
    r'(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*'
    r'|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$')
_PREFIXES = ('oci://', 'docker://')


@dataclasses.dataclass(frozen=True)
class ImageReference:
    """A parsed image reference."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def api_host(self):
        """host[:port] to talk to (Docker Hub has a separate API host)."""
        if self.registry == DEFAULT_REGISTRY:
            return DOCKER_HUB_API
        return self.registry

    @property
    def reference(self):
        """What to put after ``/manifests/``: the digest, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG

    def with_digest(self, digest):
        return dataclasses.replace(self, digest=digest)

    def __str__(self):
        out = f'{self.registry}/{self.repository}'
        if self.tag:
            out += ':' + self.tag
        if self.digest:
            out += '@' + self.digest
        return out


def is_digest(value):
    return bool(value and DIGEST_RE.match(value))


def parse(ref):
    """Parse an image reference.

    :param ref: the reference string.
    :returns: an :class:`ImageReference`; ``tag`` is ``latest`` when
        neither a tag nor a digest is given.
    :raises: InvalidImageReference
    """
    if not isinstance(ref, str) or not ref.strip():
        raise exc.InvalidImageReference(ref=ref, reason='empty reference')
    if len(ref) > MAX_REFERENCE:
        # (Not echoed whole: it would be the error message.)
        raise exc.InvalidImageReference(
            ref=ref[:60] + '...',
            reason=f'{len(ref)} characters; a reference has at most '
                   f'{MAX_REFERENCE}')
    original = ref
    ref = ref.strip()
    for prefix in _PREFIXES:
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
            break
    if '://' in ref:
        raise exc.InvalidImageReference(
            ref=original, reason='unsupported URL scheme')
    if any(c.isspace() for c in ref):
        raise exc.InvalidImageReference(ref=original,
                                        reason='contains whitespace')

    digest = None
    if '@' in ref:
        ref, digest = ref.rsplit('@', 1)
        if not DIGEST_RE.match(digest):
            raise exc.InvalidImageReference(
                ref=original,
                reason='digest must be sha256:<64 lowercase hex>')

    registry = DEFAULT_REGISTRY
    first, sep, rest = ref.partition('/')
    if sep and ('.' in first or ':' in first or first == 'localhost'
                or first.startswith('[')):
        if not _HOST_RE.match(first):
            raise exc.InvalidImageReference(
                ref=original, reason=f'invalid registry host {first!r}')
        registry = first
        ref = rest

    tag = None
    name, colon, maybe_tag = ref.rpartition(':')
    if colon and '/' not in maybe_tag:
        if not _TAG_RE.match(maybe_tag):
            raise exc.InvalidImageReference(
                ref=original, reason=f'invalid tag {maybe_tag!r}')
        tag = maybe_tag
        ref = name

    if not ref or not _REPO_RE.match(ref):
        raise exc.InvalidImageReference(
            ref=original,
            reason=f'invalid repository name {ref!r} (lowercase letters, '
                   'digits and separators . _ __ - /)')
    if len(registry) + 1 + len(ref) > MAX_NAME:
        raise exc.InvalidImageReference(
            ref=original, reason=f'the name (registry and repository) is '
                                 f'longer than {MAX_NAME} characters')
    if registry == DEFAULT_REGISTRY and '/' not in ref:
        ref = 'library/' + ref
    if tag is None and digest is None:
        tag = DEFAULT_TAG
    return ImageReference(registry=registry, repository=ref, tag=tag,
                          digest=digest)


def registry_in(registry, entries):
    """Whether ``registry`` (host[:port]) is named in ``entries``: as
    host:port, or as host for every port of that host."""
    return registry in entries or registry.rpartition(':')[0] in entries
