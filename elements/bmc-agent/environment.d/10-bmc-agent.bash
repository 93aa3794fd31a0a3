# Defaults of the bmc-agent element (see README.rst).
export DIB_APT_MINIMAL_CREATE_INTERFACES=${DIB_APT_MINIMAL_CREATE_INTERFACES:-0}
# The base element's "base packages" are open-iscsi only: no use here.
export DIB_SKIP_BASE_PACKAGE_INSTALL=${DIB_SKIP_BASE_PACKAGE_INSTALL:-1}
export DIB_BMC_AGENT_VENV=${DIB_BMC_AGENT_VENV:-/opt/ironic-python-agent}
export DIB_BMC_AGENT_PACKAGES=${DIB_BMC_AGENT_PACKAGES:-ironic-python-agent ironic-bmc-agent}
# zstd: the kernel unpacks it several times faster than gzip, and the
# file is smaller (see the sizes and host unpack time the build prints).
export DIB_BMC_AGENT_COMPRESS=${DIB_BMC_AGENT_COMPRESS:-zstd -q -T0 -10}
# A directory of wheels (IPA, its dependencies and this project); when
# empty, pip inside the image downloads from the package index.
export DIB_BMC_AGENT_WHEELHOUSE=${DIB_BMC_AGENT_WHEELHOUSE:-}
# A directory of native helpers built on the host (bmc-noise); when empty,
# the agent's OS-noise probe is its Python fallback.
export DIB_BMC_AGENT_NATIVE=${DIB_BMC_AGENT_NATIVE:-}
