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

"""Exceptions of the OCI image -> rootfs artifact pipeline.

All of them derive from :class:`ImagePipelineError`, itself an
:class:`ironic.common.exception.IronicException`, so a deploy interface can
put ``str(exc)`` into ``node.last_error`` as it is.
"""

from ironic.common import exception


class ImagePipelineError(exception.IronicException):
    _msg_fmt = 'Container image pipeline error: %(reason)s'


class InvalidImageReference(ImagePipelineError):
    code = 400
    _msg_fmt = 'Invalid container image reference "%(ref)s": %(reason)s'


class ImageNotFound(ImagePipelineError):
    code = 404
    _msg_fmt = ('Container image %(ref)s was not found in registry '
                '%(registry)s: %(reason)s')


class RegistryUnreachable(ImagePipelineError):
    code = 503
    _msg_fmt = 'Container registry %(registry)s is unreachable: %(reason)s'


class RegistryRefused(ImagePipelineError):
    code = 403
    _msg_fmt = ('The conductor does not connect to %(host)s for a container '
                'image: %(reason)s')


class RegistryAuthError(ImagePipelineError):
    code = 403
    _msg_fmt = ('Container registry %(registry)s refused access to '
                '%(ref)s: %(reason)s')


class RegistryError(ImagePipelineError):
    _msg_fmt = ('Container registry %(registry)s failed a request for '
                '%(ref)s: %(reason)s')


class ManifestDigestMismatch(ImagePipelineError):
    _msg_fmt = ('Manifest of %(ref)s does not match its digest: expected '
                '%(expected)s, got %(actual)s')


class LayerDigestMismatch(ImagePipelineError):
    _msg_fmt = ('Blob %(digest)s of %(ref)s does not match its digest '
                '(got %(actual)s, %(size)s bytes)')


class NoManifestForArch(ImagePipelineError):
    _msg_fmt = ('Image %(ref)s has no manifest for CPU architecture '
                '%(arch)s; available: %(available)s')


class UnsupportedImage(ImagePipelineError):
    _msg_fmt = 'Image %(ref)s is not supported: %(reason)s'


class UnsafeLayer(ImagePipelineError):
    """A layer tried to write outside the tree or is otherwise malformed."""
    _msg_fmt = ('Refusing layer %(layer)s: entry "%(path)s" %(reason)s')


class ImageTooLarge(ImagePipelineError):
    _msg_fmt = ('Image %(ref)s is too large: %(what)s is %(size)s bytes, '
                'the limit is %(limit)s bytes')


class ArtifactBuildError(ImagePipelineError):
    _msg_fmt = 'Cannot build the %(format)s rootfs artifact: %(reason)s'


class CacheError(ImagePipelineError):
    _msg_fmt = 'Rootfs artifact cache %(path)s: %(reason)s'
