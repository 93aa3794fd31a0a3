#!/bin/bash
# devstack plugin: install ironic-bmc next to ironic-conductor.
#
# The plugin installs the package with its conductor dependencies into
# devstack's Python environment; features add their interfaces to
# ironic.conf here as they land.

function install_ironic_bmc {
    setup_develop "$IRONIC_BMC_DIR" conductor
}

if is_service_enabled ir-cond; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing ironic-bmc"
        install_ironic_bmc
    fi
fi
