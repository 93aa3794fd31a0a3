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

"""The DCMI commands the lab's BMC answers: request bytes to response bytes.

:mod:`bmc_lab.dcmi_bmc` hands every netfn 0x2C request to
:func:`handle_dcmi`, which answers these two with the readings of a
:class:`bmc_lab.dcmi_power_meter.CpuPowerMeter` (any other command, or
group extension, gets completion code C1h):

* **DCMI Get Power Reading** (netfn 0x2C, cmd 0x02, group extension
  0xDC), modes 01h (system power statistics) and 02h (enhanced: rolling
  average over the period in request byte 3).  Response bytes after the
  completion code: ``DCh``, current W, minimum W, maximum W, average W
  (each 16-bit LSB first), IPMI timestamp (32-bit, seconds since the
  epoch), statistics reporting period in ms (32-bit), reading state
  (``40h`` = power measurement active).
* **DCMI Get Capabilities Info** (cmd 0x01), parameters 1 (supported
  capabilities: chassis power, power management, primary LAN
  out-of-band), 2 (mandatory attributes), 3 (power management by the BMC
  at 20h), 4 (LAN channel 1) and 5 (rolling average periods), laid out
  as ``ipmitool dcmi discover`` 1.8.19 decodes them.
"""

import dataclasses
import struct

NETFN_DCMI = 0x2C
DCMI_GROUP_EXTENSION = 0xDC
CMD_GET_CAPABILITIES = 0x01
CMD_GET_POWER_READING = 0x02

CC_OK = 0x00
#: DCMI: parameter not supported.
CC_PARAMETER_NOT_SUPPORTED = 0x80
#: Node busy, retry (virtualbmc's IPMI_COMMAND_NODE_BUSY).
CC_NODE_BUSY = 0xC0
CC_INVALID_COMMAND = 0xC1
CC_INVALID_DATA = 0xCC
CC_UNSPECIFIED = 0xFF

MODE_SYSTEM_POWER_STATISTICS = 0x01
MODE_ENHANCED_STATISTICS = 0x02

#: Reading state byte: bit 6 = power measurement active.
STATE_ACTIVE = 0x40

#: DCMI conformance 1.5, parameter revision 02h.
DCMI_VERSION = (0x01, 0x05)
DCMI_PARAMETER_REVISION = 0x02

#: Rolling average periods advertised for mode 02h (bits 7:6 unit:
#: 00 s, 01 min, 10 h): 5 s, 15 s, 30 s, 1, 5, 15, 30 min, 1 h.
ROLLING_PERIODS = (0x05, 0x0F, 0x1E, 0x41, 0x45, 0x4F, 0x5E, 0x81)


@dataclasses.dataclass(frozen=True)
class Reading:
    current: int
    minimum: int
    maximum: int
    average: int
    timestamp: int      # seconds since the epoch
    period_ms: int
    state: int = STATE_ACTIVE


def decode_rolling_period(byte):
    """Seconds of a DCMI rolling-average period byte (bits 7:6 = unit)."""
    unit = (byte >> 6) & 0x3
    value = byte & 0x3F
    return value * (1, 60, 3600, 86400)[unit]


def encode_power_reading(reading):
    """Response data (after the completion code) of Get Power Reading."""
    return ([DCMI_GROUP_EXTENSION]
            + list(struct.pack('<HHHHIIB', reading.current, reading.minimum,
                               reading.maximum, reading.average,
                               reading.timestamp, reading.period_ms,
                               reading.state)))


def handle_dcmi(command, data, meter):
    """(completion code, response data) of one DCMI request; ``meter``
    (a :class:`bmc_lab.dcmi_power_meter.CpuPowerMeter`) gives the power
    readings."""
    if not data or data[0] != DCMI_GROUP_EXTENSION:
        # Another group extension (PICMG, VSO...) on netfn 0x2C.
        return CC_INVALID_COMMAND, []
    if command == CMD_GET_POWER_READING:
        return _power_reading(data, meter)
    if command == CMD_GET_CAPABILITIES:
        return _capabilities(data)
    return CC_INVALID_COMMAND, []


def _power_reading(data, meter):
    if len(data) < 4:
        return CC_INVALID_DATA, []
    mode = data[1]
    if mode == MODE_SYSTEM_POWER_STATISTICS:
        period = None
    elif mode == MODE_ENHANCED_STATISTICS:
        period = decode_rolling_period(data[2])
        if period <= 0:
            return CC_INVALID_DATA, []
    else:
        return CC_INVALID_DATA, []
    reading = meter.reading(period)
    if reading is None:
        # Could not sample the domain at all yet: "node busy, retry".
        return CC_NODE_BUSY, []
    return CC_OK, encode_power_reading(reading)


def _capabilities(data):
    if len(data) < 2:
        return CC_INVALID_DATA, []
    header = [DCMI_GROUP_EXTENSION, DCMI_VERSION[0], DCMI_VERSION[1],
              DCMI_PARAMETER_REVISION]
    selector = data[1]
    if selector == 1:
        # Mandatory: chassis power (bit 2); optional: power
        # management (bit 0); access: primary LAN out of band (bit 3).
        return CC_OK, header + [0b0100, 0b0001, 0b1000]
    if selector == 2:
        # Mandatory attributes: no SEL entries, identification by
        # GUID, no DCMI temperature sensors.
        return CC_OK, header + [0x00, 0x00, 0b001, 0x00]
    if selector == 3:
        # Power management by the BMC itself: slave address 20h
        # (0x40 as an 8-bit field), channel 0, device revision 0.
        return CC_OK, header + [0x40, 0x00]
    if selector == 4:
        # Primary LAN channel 1; no secondary LAN, no serial channel.
        return CC_OK, header + [0x01, 0xFF, 0xFF]
    if selector == 5:
        # Enhanced system power statistics: the rolling periods a
        # mode-02h power reading accepts.
        return CC_OK, header + [len(ROLLING_PERIODS)] + list(
            ROLLING_PERIODS)
    return CC_PARAMETER_NOT_SUPPORTED, []
