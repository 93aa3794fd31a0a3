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

"""Read a node's whole-system power, in watts, from its BMC.

A reader has ``method`` (``"ipmi-dcmi"`` or ``"redfish"``), ``target``
(where it reads from, for messages), ``read() -> float`` watts and
``close()``.  ``read`` raises :class:`PowerReadingUnavailable` with a
human-readable reason; ``permanent`` is True when asking again cannot
help (the BMC does not implement the reading), so a sampler stops polling.
"""

import os
import re
import subprocess
import threading

from oslo_log import log
from oslo_utils import strutils
import sushy
from sushy import connector as sushy_connector
from sushy import exceptions as sushy_exc

LOG = log.getLogger(__name__)

METHOD_IPMI_DCMI = 'ipmi-dcmi'
METHOD_REDFISH = 'redfish'

#: Codes after which asking again cannot help.
_PERMANENT_CODES = (0xC1, 0xD6)


class PowerReadingUnavailable(Exception):
    """No power reading; ``reason`` says why in words an operator reads."""

    def __init__(self, reason, permanent=False):
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


# --- IPMI DCMI ---------------------------------------------------------------
#
# Readings go through ipmitool, the tool Ironic's own ipmi hardware type
# drives: one short-lived RMCP+ session per reading, nothing cached
# between readings.  pyghmi's client (Command.get_system_power_watts)
# was tried first; against pyghmi-based BMCs (virtualbmc, the lab's
# dcmi_bmc) its cached session gets stuck "logging in again" (pyghmi
# 1.6.19: Session.logoutexpiry None) once the BMC has also served other
# clients, and every later reading fails.

_READING = re.compile(r'Instantaneous power reading:\s*(\d+)\s*Watts')
#: ipmitool's words for "this BMC does not implement the command".
_NOT_IMPLEMENTED = ('Invalid command', 'Invalid Command',
                    'not supported', 'Not supported', '(c1)', '(0xc1)')


class IPMIDCMIReader:
    """Watts from DCMI Get Power Reading, through ipmitool."""

    method = METHOD_IPMI_DCMI

    def __init__(self, address, port=623, username='', password='',
                 cipher_suite=3, timeout=10):
        self.address = address
        self.port = int(port)
        self.username = username or ''
        self.password = password or ''
        self.cipher_suite = int(cipher_suite)
        if self.cipher_suite not in (3, 17):
            raise ValueError('IPMI cipher suite %s is not supported for '
                             'power readings (use 3 or 17)' % cipher_suite)
        self.timeout = timeout

    @property
    def target(self):
        return '%s:%d' % (self.address, self.port)

    def __repr__(self):
        return '<IPMIDCMIReader %s>' % self.target

    def read(self):
        argv = ['ipmitool', '-I', 'lanplus', '-H', self.address,
                '-p', str(self.port), '-U', self.username, '-E',
                '-C', str(self.cipher_suite), '-R', '1', '-N', '2',
                'dcmi', 'power', 'reading']
        env = dict(os.environ, IPMI_PASSWORD=self.password)
        try:
            res = subprocess.run(argv, capture_output=True, text=True,
                                 env=env, timeout=self.timeout)
        except FileNotFoundError:
            raise PowerReadingUnavailable(
                'ipmitool is not installed on the conductor', permanent=True)
        except subprocess.TimeoutExpired:
            raise PowerReadingUnavailable(
                'the BMC at %s did not answer a DCMI power reading within '
                '%ss' % (self.target, self.timeout))
        output = (res.stdout + res.stderr).strip()
        match = _READING.search(res.stdout)
        if res.returncode == 0 and match:
            return float(match.group(1))
        if any(word in output for word in _NOT_IMPLEMENTED):
            raise PowerReadingUnavailable(
                'BMC at %s does not implement DCMI Get Power Reading (%s)'
                % (self.target, output.splitlines()[-1] if output
                   else 'no output'), permanent=True)
        raise PowerReadingUnavailable(
            'DCMI power reading from the BMC at %s failed: %s'
            % (self.target, output.splitlines()[-1] if output
               else 'ipmitool exited with %d' % res.returncode))

    def close(self):
        pass


def _odata_id(doc, key):
    ref = doc.get(key)
    if isinstance(ref, dict):
        return ref.get('@odata.id')
    return None


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class RedfishPowerReader:
    """Watts from a Redfish service, for the chassis of one system.

    On the first read the chassis that the system links to are searched,
    in this order, for a whole-node power reading:

    1. ``Chassis/{id}/EnvironmentMetrics`` -> ``PowerWatts.Reading``
       (Redfish 2020.4 and later);
    2. ``Chassis/{id}/Power`` -> ``PowerControl[0].PowerConsumedWatts``
       (the older model, still the most common);
    3. ``Chassis/{id}/PowerSubsystem/PowerSupplies/*/Metrics`` ->
       sum of ``InputPowerWatts.Reading``.

    The source found is kept, so a read costs one GET for 1 and 2.  sushy
    (5.x) models none of these fields, so the JSON is read raw through
    sushy's connector (which handles sessions/basic auth and retries).
    """

    method = METHOD_REDFISH

    def __init__(self, address, system_id=None, username=None,
                 password=None, verify_ca=True, root_prefix='/redfish/v1/'):
        if '://' not in address:
            address = 'https://' + address
        self.address = address.rstrip('/')
        self.system_id = system_id
        self.username = username
        self.password = password
        self.verify_ca = verify_ca
        self.root_prefix = root_prefix
        self._conn = None
        self._root = None
        self._source = None
        self._lock = threading.Lock()

    @property
    def target(self):
        return '%s%s' % (self.address,
                         (' system %s' % self.system_id)
                         if self.system_id else '')

    def __repr__(self):
        return '<RedfishPowerReader %s>' % self.target

    def _connect(self):
        self._conn = sushy_connector.Connector(self.address,
                                               verify=self.verify_ca)
        self._root = sushy.Sushy(self.address, username=self.username,
                                 password=self.password,
                                 root_prefix=self.root_prefix,
                                 verify=self.verify_ca,
                                 connector=self._conn)

    def _get(self, path):
        return self._conn.get(path=path).json()

    def _chassis_paths(self):
        system = self._root.get_system(self.system_id)
        links = (system.json or {}).get('Links', {}).get('Chassis') or []
        paths = [c['@odata.id'] for c in links
                 if isinstance(c, dict) and c.get('@odata.id')]
        if not paths:
            paths = list(self._root.get_chassis_collection()
                         .members_identities)
        return paths

    def _discover(self):
        looked = []
        for chassis_path in self._chassis_paths():
            chassis = self._get(chassis_path)
            candidates = (
                ('EnvironmentMetrics', self._from_environment_metrics),
                ('Power', self._from_power),
                ('PowerSubsystem', self._from_power_subsystem),
            )
            for key, extract in candidates:
                path = _odata_id(chassis, key)
                if not path:
                    continue
                looked.append(path)
                try:
                    watts = extract(path)
                except sushy_exc.SushyError as exc:
                    LOG.debug('%s: %s', path, exc)
                    continue
                if watts is not None:
                    return extract, path
        raise PowerReadingUnavailable(
            'the Redfish service at %s offers no power reading for this '
            'system (looked at: %s)'
            % (self.target, ', '.join(looked) or 'no chassis with '
               'EnvironmentMetrics, Power or PowerSubsystem'),
            permanent=True)

    def _from_environment_metrics(self, path):
        doc = self._get(path)
        return _number((doc.get('PowerWatts') or {}).get('Reading'))

    def _from_power(self, path):
        doc = self._get(path)
        for control in doc.get('PowerControl') or ():
            watts = _number(control.get('PowerConsumedWatts'))
            if watts is not None:
                return watts
        return None

    def _from_power_subsystem(self, path):
        doc = self._get(path)
        supplies_path = _odata_id(doc, 'PowerSupplies')
        if not supplies_path:
            return None
        total, found = 0.0, False
        for member in self._get(supplies_path).get('Members') or ():
            supply = self._get(member['@odata.id'])
            metrics_path = _odata_id(supply, 'Metrics')
            if not metrics_path:
                continue
            reading = _number((self._get(metrics_path).get(
                'InputPowerWatts') or {}).get('Reading'))
            if reading is not None:
                total += reading
                found = True
        return total if found else None

    def read(self):
        with self._lock:
            try:
                if self._root is None:
                    self._connect()
                if self._source is None:
                    self._source = self._discover()
                extract, path = self._source
                watts = extract(path)
            except PowerReadingUnavailable:
                raise
            except sushy_exc.ConnectionError as exc:
                self._root = None
                raise PowerReadingUnavailable(
                    'cannot reach the Redfish service at %s: %s'
                    % (self.target, exc))
            except sushy_exc.AccessError as exc:
                self._root = None
                raise PowerReadingUnavailable(
                    'the Redfish service at %s refused access: %s'
                    % (self.target, exc))
            except (sushy_exc.SushyError, ValueError, KeyError) as exc:
                self._source = None
                raise PowerReadingUnavailable(
                    'the Redfish service at %s gave no power reading: %s'
                    % (self.target, exc))
            if watts is None:
                raise PowerReadingUnavailable(
                    'the Redfish service at %s reports no value at %s '
                    '(is the system powered off?)' % (self.target, path))
            return watts

    def close(self):
        with self._lock:
            self._root = None
            self._conn = None


# --- choosing a reader for a node --------------------------------------------

def _verify_ca(value):
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in ('true', 'false', 'yes', 'no', 'on', 'off', '1',
                        '0'):
        return strutils.bool_from_string(text)
    return text  # a CA bundle path


def reader_for_node(node):
    """A power reader for an Ironic node, chosen by its driver_info.

    IPMI-family drivers (``ipmi_address`` in driver_info) read DCMI;
    Redfish drivers (``redfish_address``) read Redfish.  When a node has
    both, its driver's name decides.  Raises PowerReadingUnavailable
    (permanent) with the reason otherwise.
    """
    info = getattr(node, 'driver_info', None) or {}
    driver = getattr(node, 'driver', None) or ''
    has_ipmi = bool(info.get('ipmi_address'))
    has_redfish = bool(info.get('redfish_address'))
    if has_redfish and ('redfish' in driver or not has_ipmi):
        return RedfishPowerReader(
            info['redfish_address'], system_id=info.get('redfish_system_id'),
            username=info.get('redfish_username'),
            password=info.get('redfish_password'),
            verify_ca=_verify_ca(info.get('redfish_verify_ca')))
    if has_ipmi:
        try:
            return IPMIDCMIReader(
                info['ipmi_address'], port=info.get('ipmi_port') or 623,
                username=info.get('ipmi_username'),
                password=info.get('ipmi_password'),
                cipher_suite=info.get('ipmi_cipher_suite') or 3)
        except ValueError as exc:
            raise PowerReadingUnavailable(
                'node %s: %s' % (getattr(node, 'uuid', '?'), exc),
                permanent=True)
    raise PowerReadingUnavailable(
        'node %s (driver %s) has neither ipmi_address nor redfish_address '
        'in its driver_info: BMC power readings need IPMI DCMI or Redfish'
        % (getattr(node, 'uuid', '?'), driver or 'unknown'),
        permanent=True)
