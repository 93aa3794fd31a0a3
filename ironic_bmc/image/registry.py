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

"""A registry client for container images, built on Ironic's OciClient.

Ironic's :class:`ironic.common.oci_registry.OciClient` is made for ORAS
disk-image artifacts: its manifest call accepts only the OCI manifest media
type (no Docker schema2 manifests or lists), tag resolution lists every
tag of the repository first, and its blob download refuses manifests with
more than one layer.  What fits is its session and the registry
authentication handshake (Bearer token and Basic, Ironic's pull-secret
convention, ``[oci]`` TLS and HTTP-fallback options, trusted CDN
redirects); this module uses those and does the container-specific calls
itself: manifest and index fetch with all OCI and Docker media types,
digest checks on the exact bytes received, platform selection and streamed
blob download with sha256 verification.
"""

import hashlib
import json

import requests
from ironic.common import exception as ironic_exc
from ironic.common import oci_registry
from oslo_log import log

from ironic_bmc.conf import CONF
from ironic_bmc.image import egress
from ironic_bmc.image import exceptions as exc

LOG = log.getLogger(__name__)

MEDIA_OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json'
MEDIA_OCI_INDEX = 'application/vnd.oci.image.index.v1+json'
MEDIA_DOCKER_MANIFEST = (
    'application/vnd.docker.distribution.manifest.v2+json')
MEDIA_DOCKER_LIST = (
    'application/vnd.docker.distribution.manifest.list.v2+json')
MANIFEST_TYPES = (MEDIA_OCI_MANIFEST, MEDIA_DOCKER_MANIFEST)
INDEX_TYPES = (MEDIA_OCI_INDEX, MEDIA_DOCKER_LIST)
ACCEPT = ', '.join(MANIFEST_TYPES + INDEX_TYPES)

#: Manifests, indexes and configs larger than this are refused.
MAX_JSON_SIZE = 4 * 1024 * 1024
CHUNK = 1024 * 1024

#: Ironic's cpu_arch names to OCI platform architectures.
ARCH_ALIASES = {
    'x86_64': 'amd64', 'amd64': 'amd64',
    'aarch64': 'arm64', 'arm64': 'arm64',
    'i386': '386', 'i686': '386',
    'armv7l': 'arm', 'ppc64le': 'ppc64le', 's390x': 's390x',
    'riscv64': 'riscv64',
}


def oci_arch(cpu_arch):
    """Map an Ironic ``cpu_arch`` to the OCI architecture name."""
    if not cpu_arch:
        return None
    return ARCH_ALIASES.get(cpu_arch.lower(), cpu_arch.lower())


def split_pull_secret(secret):
    """Split a pull secret as Ironic does: bare token or ``user:password``.

    :returns: (username, password); both None without a secret.
    """
    if not secret:
        return None, None
    if ':' not in secret:
        return '', secret
    username, password = secret.split(':', 1)
    return username, password


def sha256_digest(data):
    return 'sha256:' + hashlib.sha256(data).hexdigest()


class RegistryClient:
    """Talks to one repository of one registry.

    :param ref: an :class:`~ironic_bmc.image.reference.ImageReference`.
    :param pull_secret: a bare token or ``user:password`` (optional).
    :param insecure: talk plain HTTP to this registry (lab registries);
        otherwise HTTPS, with Ironic's
        ``[oci]permit_fallback_to_http_transport`` honoured.
    :param verify: TLS verification (bool or CA bundle path); defaults to
        ``[oci]verify_ca``/``[DEFAULT]webserver_verify_ca``.
    :param timeout: per-request timeout in seconds; defaults to
        ``[DEFAULT]webserver_connection_timeout``.
    """

    def __init__(self, ref, pull_secret=None, insecure=False, verify=None,
                 timeout=None):
        self.ref = ref
        self._username, self._password = split_pull_secret(pull_secret)
        if verify is None:
            verify = CONF.oci.verify_ca
            if verify is None:
                verify = CONF.webserver_verify_ca
        self._timeout = timeout or CONF.webserver_connection_timeout
        self._oci = oci_registry.OciClient(verify=verify)
        # Every request of this client, token realms and redirects too.
        egress.guard(self._oci.session,
                     with_secret=bool(self._username or self._password))
        if insecure:
            # OciClient builds every URL with this scheme once it is set;
            # it is what its own HTTP fallback sets.
            self._oci._override_protocol_scheme = 'http'
        self._authenticated = False

    # --- plumbing -----------------------------------------------------

    def _url(self, path):
        scheme = self._oci._override_protocol_scheme or 'https'
        return f'{scheme}://{self.ref.api_host}/v2/{self.ref.repository}/{path}'

    def _fail_common(self, reason):
        return exc.RegistryUnreachable(registry=self.ref.registry,
                                       reason=reason)

    def authenticate(self):
        """Run the registry's auth handshake (anonymous when no secret)."""
        image = 'oci://{}/{}:{}'.format(self.ref.api_host, self.ref.repository,
                                    self.ref.tag or 'latest')
        try:
            self._oci.authenticate(image, username=self._username,
                                   password=self._password)
        except ironic_exc.ImageServiceAuthenticationRequired:
            raise exc.RegistryAuthError(
                registry=self.ref.registry, ref=self.ref,
                reason='the registry requires credentials and no pull '
                       'secret (or only a bare token for Basic auth) was '
                       'given')
        except requests.HTTPError as e:
            status = e.response.status_code if e.response is not None else 0
            if status in (401, 403):
                raise exc.RegistryAuthError(
                    registry=self.ref.registry, ref=self.ref,
                    reason=f'HTTP {status} from {e.response.url}')
            raise exc.RegistryError(registry=self.ref.registry,
                                    ref=self.ref, reason=str(e))
        except requests.RequestException as e:
            raise self._fail_common(str(e))
        except AttributeError as e:
            # OciClient's way of saying "unknown auth scheme / no token".
            raise exc.RegistryError(registry=self.ref.registry,
                                    ref=self.ref, reason=str(e))
        self._authenticated = True

    def _get(self, path, accept=None, what='manifest'):
        """GET a registry path, streamed; map failures to our exceptions."""
        if not self._authenticated:
            self.authenticate()
        url = self._url(path)
        headers = {'Accept': accept} if accept else {}
        for attempt in (1, 2):
            try:
                resp = oci_registry.RegistrySessionHelper.get(
                    self._oci.session, url, headers=headers, stream=True,
                    timeout=self._timeout)
            except requests.RequestException as e:
                raise self._fail_common(str(e))
            if resp.status_code == 401 and attempt == 1:
                # Tokens expire; do the handshake once more.
                resp.close()
                self.authenticate()
                continue
            break
        status = resp.status_code
        if status == 200:
            return resp
        # The body is the remote host's to choose: the conductor's log gets
        # a bounded excerpt, the user-visible error only the status.
        body = b''
        if not resp.is_redirect:
            try:
                body = next(resp.iter_content(300), b'')[:300]
            except requests.RequestException:
                pass
        resp.close()
        LOG.debug('Registry %(reg)s answered HTTP %(status)s for %(url)s: '
                  '%(body)r', {'reg': self.ref.registry, 'status': status,
                               'url': url, 'body': body})
        if status in (401, 403):
            raise exc.RegistryAuthError(
                registry=self.ref.registry, ref=self.ref,
                reason=f'HTTP {status} for {what} {url}')
        if status == 404:
            raise exc.ImageNotFound(
                ref=self.ref, registry=self.ref.registry,
                reason=f'{what} {path.split("/", 1)[-1]} not found '
                       '(HTTP 404)')
        raise exc.RegistryError(
            registry=self.ref.registry, ref=self.ref,
            reason=f'HTTP {status} for {what} {url}')

    @staticmethod
    def _read_limited(resp, limit):
        data = bytearray()
        for chunk in resp.iter_content(64 * 1024):
            data += chunk
            if len(data) > limit:
                resp.close()
                return None
        return bytes(data)

    # --- manifests ----------------------------------------------------

    def get_manifest(self, reference):
        """Fetch a manifest or index by tag or digest.

        The sha256 of the bytes received is checked against the digest
        asked for, or against the registry's ``Docker-Content-Digest``
        when asking by tag.

        :returns: (digest, media_type, parsed JSON dict)
        """
        resp = self._get(f'manifests/{reference}', accept=ACCEPT)
        with resp:
            body = self._read_limited(resp, MAX_JSON_SIZE)
            header_digest = resp.headers.get('Docker-Content-Digest')
            ctype = resp.headers.get('Content-Type', '').split(';')[0]
        if body is None:
            raise exc.UnsupportedImage(
                ref=self.ref, reason=f'manifest {reference} is larger than '
                f'{MAX_JSON_SIZE} bytes')
        actual = sha256_digest(body)
        expected = reference if reference.startswith('sha256:') else None
        if expected is None and header_digest and header_digest.startswith(
                'sha256:'):
            expected = header_digest
        if expected and expected != actual:
            raise exc.ManifestDigestMismatch(ref=self.ref, expected=expected,
                                             actual=actual)
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise exc.UnsupportedImage(
                ref=self.ref, reason=f'manifest {reference} is not JSON: {e}')
        if not isinstance(doc, dict):
            raise exc.UnsupportedImage(ref=self.ref,
                                       reason='manifest is not an object')
        media_type = doc.get('mediaType') or ctype
        if media_type not in MANIFEST_TYPES + INDEX_TYPES:
            if 'manifests' in doc:
                media_type = MEDIA_OCI_INDEX
            elif 'layers' in doc:
                media_type = MEDIA_OCI_MANIFEST
            else:
                raise exc.UnsupportedImage(
                    ref=self.ref, reason='unsupported manifest media type '
                    f'{media_type!r}')
        return actual, media_type, doc

    @staticmethod
    def select_platform(index, arch, os_name='linux'):
        """Pick the index entry for ``arch``; None when there is none."""
        candidates = []
        for entry in index.get('manifests') or ():
            plat = entry.get('platform') or {}
            if plat.get('architecture') != arch:
                continue
            if plat.get('os', 'linux') != os_name:
                continue
            if entry.get('mediaType') not in (None,) + MANIFEST_TYPES:
                continue
            candidates.append(entry)
        if not candidates:
            return None
        # arm64 images may carry variant v8; prefer it or no variant.
        candidates.sort(key=lambda e: (e.get('platform') or {}).get(
            'variant') not in (None, 'v8'))
        return candidates[0]

    @staticmethod
    def available_platforms(index):
        out = []
        for entry in index.get('manifests') or ():
            plat = entry.get('platform') or {}
            name = '{}/{}'.format(plat.get('os', '?'),
                              plat.get('architecture', '?'))
            if plat.get('variant'):
                name += '/' + plat['variant']
            out.append(name)
        return ', '.join(out) or 'none'

    # --- blobs ----------------------------------------------------------

    def get_blob_json(self, digest):
        """Fetch a small JSON blob (the image config) and verify it."""
        resp = self._get(f'blobs/{digest}', what='blob')
        with resp:
            body = self._read_limited(resp, MAX_JSON_SIZE)
        if body is None:
            raise exc.UnsupportedImage(
                ref=self.ref, reason=f'config blob {digest} is too large')
        actual = sha256_digest(body)
        if actual != digest:
            raise exc.LayerDigestMismatch(ref=self.ref, digest=digest,
                                          actual=actual, size=len(body))
        try:
            return json.loads(body)
        except ValueError as e:
            raise exc.UnsupportedImage(
                ref=self.ref, reason=f'config {digest} is not JSON: {e}')

    def download_blob(self, digest, fileobj, expected_size=None,
                      max_size=None):
        """Stream a blob into ``fileobj``, verifying its sha256 digest.

        :param expected_size: the descriptor's size; a blob that grows
            beyond it is cut off and refused.
        :param max_size: hard limit regardless of the descriptor.
        :returns: number of bytes written.
        :raises: LayerDigestMismatch, ImageTooLarge, Registry* errors.
        """
        if not digest.startswith('sha256:'):
            raise exc.UnsupportedImage(
                ref=self.ref, reason=f'blob digest algorithm of {digest} '
                'is not supported (sha256 only)')
        limit = max_size
        if expected_size is not None:
            limit = (expected_size if limit is None
                     else min(limit, expected_size))
        hasher = hashlib.sha256()
        size = 0
        resp = self._get(f'blobs/{digest}', what='blob')
        with resp:
            try:
                for chunk in resp.iter_content(CHUNK):
                    size += len(chunk)
                    if limit is not None and size > limit:
                        if expected_size is not None and (
                                max_size is None or
                                expected_size <= max_size):
                            raise exc.LayerDigestMismatch(
                                ref=self.ref, digest=digest,
                                actual=f'more data than the {expected_size} '
                                'bytes the manifest declares',
                                size=size)
                        raise exc.ImageTooLarge(
                            ref=self.ref, what=f'blob {digest}',
                            size=size, limit=max_size)
                    hasher.update(chunk)
                    fileobj.write(chunk)
            except requests.RequestException as e:
                raise self._fail_common(
                    f'download of blob {digest} failed: {e}')
        actual = 'sha256:' + hasher.hexdigest()
        if actual != digest:
            raise exc.LayerDigestMismatch(ref=self.ref, digest=digest,
                                          actual=actual, size=size)
        LOG.debug('Downloaded blob %(d)s of %(ref)s, %(s)d bytes',
                  {'d': digest, 'ref': self.ref, 's': size})
        return size
