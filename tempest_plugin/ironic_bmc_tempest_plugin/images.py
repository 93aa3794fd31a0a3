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

"""Glance images that name a container, as a tenant uploads them."""

import io
import json

from tempest.lib.common.utils import data_utils


def create(test, client, disk_format='raw', **properties):
    """An active Glance image with these properties, deleted after
    ``test``.  Lists and dicts are stored as JSON (Glance keeps
    strings); a kernel (aki) or ramdisk (ari) gets the container format
    of the same name."""
    props = {k: json.dumps(v) if isinstance(v, (dict, list)) else v
             for k, v in properties.items()}
    image = client.create_image(
        name=data_utils.rand_name('bmc-container'),
        container_format='bare' if disk_format == 'raw' else disk_format,
        disk_format=disk_format, **props)
    test.addCleanup(client.delete_image, image['id'])
    # Glance keeps an image without data "queued"; Nova refuses that.
    client.store_image_file(image['id'], io.BytesIO(b'unused\n'))
    return image
