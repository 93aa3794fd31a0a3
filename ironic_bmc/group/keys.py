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

"""SSH keys a run group makes for itself.

Each member has a user key and a host key of its own, made by its
conductor when it joins; the members' public keys are what the others
trust (``authorized_keys``, ``known_hosts``).  No key is shared, so no
conductor hands a private key to another node.
"""

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives import serialization


def new_pair(comment):
    """A new ed25519 key: ``(OpenSSH private key, public key line)``."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode('ascii')
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH,
        serialization.PublicFormat.OpenSSH).decode('ascii')
    return private, '%s %s' % (public, comment)


def member_keys(hostname_hint):
    """A joining member's keys: ``{"user": (private, public), "host":
    (private, public)}``."""
    return {'user': new_pair('bmc-group-user@%s' % hostname_hint),
            'host': new_pair('bmc-group-host@%s' % hostname_hint)}
