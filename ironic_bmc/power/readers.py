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

import re
import subprocess
import threading
import types

from ironic.common import exception
from ironic.drivers.modules import ipmitool
from oslo_concurrency import processutils
from ironic.drivers.modules.redfish import utils as redfish_utils
from oslo_log import log
from sushy import exceptions as sushy_exc

from ironic_bmc.conf import CONF

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
# Readings go through Ironic's own ipmitool command path, with the
# driver_info Ironic's ipmitool driver parses from the node: protocol
# version, privilege level, bridging, Kg key, cipher suite (and its
# fallback through [ipmi]cipher_suite_versions), the password file or
# environment, retries, and [ipmi]min_command_interval, which Ironic keeps
# per BMC address for every ipmitool call of this conductor, so sampling
# never talks to a BMC more often than the power interface may.  One
# short-lived RMCP+ session per reading: pyghmi's cached session
# (Command.get_system_power_watts) was tried first and gets stuck
# "logging in again" against pyghmi-based BMCs (virtualbmc, the lab's
# dcmi_bmc) once they have served other clients.

_READING = re.compile(r'Instantaneous power reading:\s*(\d+)\s*Watts')
#: ipmitool's words for "this BMC does not implement the command".
_NOT_IMPLEMENTED = ('Invalid command', 'Invalid Command',
                    'not supported', 'Not supported', '(c1)', '(0xc1)')


def _last_line(text, default):
    lines = [ln.strip() for ln in (text or '').splitlines() if ln.strip()]
    return lines[-1] if lines else default


class IPMIDCMIReader:
    """Watts from DCMI Get Power Reading, through Ironic's ipmitool.

    :param driver_info: what ``ipmitool._parse_driver_info`` returns for
        the node (see :meth:`for_node`).
    """

    method = METHOD_IPMI_DCMI

    def __init__(self, driver_info):
        self._info = driver_info

    @classmethod
    def for_node(cls, node):
        """A reader for ``node``, its driver_info parsed (and checked) as
        Ironic's ipmitool driver does.

        :raises: PowerReadingUnavailable (permanent) naming what is wrong.
        """
        try:
            return cls(ipmitool._parse_driver_info(node))
        except exception.IronicException as exc:
            raise PowerReadingUnavailable(
                'node %s: %s' % (node.uuid, exc), permanent=True)

    @property
    def target(self):
        return '%s:%s' % (self._info['address'],
                          self._info.get('dest_port') or 623)

    def __repr__(self):
        return '<IPMIDCMIReader %s>' % self.target

    def read(self):
        try:
            out, _err = ipmitool._exec_ipmitool(
                self._info, 'dcmi power reading', kill_on_timeout=True)
        except processutils.ProcessExecutionError as exc:
            output = '%s\n%s' % (exc.stdout or '', exc.stderr or '')
            if any(word in output for word in _NOT_IMPLEMENTED):
                raise PowerReadingUnavailable(
                    'BMC at %s does not implement DCMI Get Power Reading '
                    '(%s)' % (self.target, _last_line(output, 'no output')),
                    permanent=True)
            raise PowerReadingUnavailable(
                'DCMI power reading from the BMC at %s failed: %s'
                % (self.target, _last_line(
                    output, 'ipmitool exited with %s' % exc.exit_code)))
        except subprocess.TimeoutExpired:
            raise PowerReadingUnavailable(
                'the BMC at %s did not answer a DCMI power reading within '
                '%ss' % (self.target, CONF.ipmi.command_retry_timeout))
        except FileNotFoundError:
            raise PowerReadingUnavailable(
                'ipmitool is not installed on the conductor', permanent=True)
        except (OSError, exception.PasswordFileFailedToCreate) as exc:
            raise PowerReadingUnavailable(
                'cannot run ipmitool for the BMC at %s: %s'
                % (self.target, exc))
        match = _READING.search(out or '')
        if not match:
            raise PowerReadingUnavailable(
                'the BMC at %s answered a DCMI power reading without '
                'a reading (%s)' % (self.target,
                                    _last_line(out, 'no output')))
        return float(match.group(1))

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
    """Watts from a node's Redfish service, for the chassis of its system.

    The node's driver_info is parsed, and the service reached, through
    Ironic's Redfish driver (``redfish_utils``): address, system id, TLS
    settings, ``redfish_auth_type`` and the session that Ironic's power
    interface already holds for that BMC (its session cache), with its
    connection retries.

    On the first read the chassis that the system links to are searched,
    in this order, for a whole-node power reading:

    1. ``Chassis/{id}/EnvironmentMetrics`` -> ``PowerWatts.Reading``
       (Redfish 2020.4 and later);
    2. ``Chassis/{id}/Power`` -> ``PowerControl[0].PowerConsumedWatts``
       (the older model, still the most common);
    3. ``Chassis/{id}/PowerSubsystem/PowerSupplies/*/Metrics`` ->
       sum of ``InputPowerWatts.Reading``.

    The source found is kept, so a read costs one GET for 1 and 2.  sushy
    (5.x) models none of these fields, so the JSON is read raw through the
    system's connector.
    """

    method = METHOD_REDFISH

    def __init__(self, node):
        """:raises: PowerReadingUnavailable (permanent) naming a bad or
        missing driver_info field."""
        try:
            info = redfish_utils.parse_driver_info(node)
        except exception.IronicException as exc:
            raise PowerReadingUnavailable(
                'node %s: %s' % (node.uuid, exc), permanent=True)
        # What Ironic's Redfish helpers read of a node, kept as it was
        # when sampling started (the sampler reads from its own thread).
        self._node = types.SimpleNamespace(
            uuid=node.uuid, driver=node.driver,
            driver_info=dict(node.driver_info),
            driver_internal_info=dict(
                getattr(node, 'driver_internal_info', None) or {}))
        self.address = info['address']
        self.system_id = info.get('system_id')
        self._conn = None
        self._system = None
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
        self._system = redfish_utils.get_system(self._node)
        self._conn = self._system._conn

    def _get(self, path):
        return self._conn.get(path=path).json()

    def _chassis_paths(self):
        links = (self._system.json or {}).get('Links', {}).get(
            'Chassis') or []
        paths = [c['@odata.id'] for c in links
                 if isinstance(c, dict) and c.get('@odata.id')]
        if not paths:
            paths = [c.path for c in self._system.chassis]
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
                if self._conn is None:
                    self._connect()
                if self._source is None:
                    self._source = self._discover()
                extract, path = self._source
                watts = extract(path)
            except PowerReadingUnavailable:
                raise
            except (exception.RedfishConnectionError,
                    sushy_exc.ConnectionError) as exc:
                self._conn = None
                raise PowerReadingUnavailable(
                    'cannot reach the Redfish service at %s: %s'
                    % (self.target, exc))
            except (exception.RedfishError, sushy_exc.AccessError) as exc:
                self._conn = None
                raise PowerReadingUnavailable(
                    'the Redfish service at %s refused the reading: %s'
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
            self._conn = None
            self._system = None


# --- choosing a reader for a node --------------------------------------------

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
        return RedfishPowerReader(node)
    if has_ipmi:
        return IPMIDCMIReader.for_node(node)
    raise PowerReadingUnavailable(
        'node %s (driver %s) has neither ipmi_address nor redfish_address '
        'in its driver_info: BMC power readings need IPMI DCMI or Redfish'
        % (getattr(node, 'uuid', '?'), driver or 'unknown'),
        permanent=True)
