#!/bin/bash
# devstack plugin: install ironic-bmc next to ironic-conductor and enable
# the container deploy interface.
#
#   enable_plugin ironic-bmc https://opendev.org/x/ironic-bmc
#
# Nodes then use --driver container-ipmi --deploy-interface container
# --vendor-interface container (virtualbmc nodes created by the ironic
# plugin use ipmi; switch them with "baremetal node set").

function install_ironic_bmc {
    # The conductor plugin and the definitions it shares with the agent;
    # the node side goes into the agent ramdisk (elements/), the lab
    # nowhere.
    setup_develop "$IRONIC_BMC_DIR/common"
    setup_develop "$IRONIC_BMC_DIR"
}

function _append_list_option {
    # _append_list_option SECTION OPTION VALUE: prepend VALUE to a list.
    local current
    current=$(iniget "$IRONIC_CONF_FILE" "$1" "$2")
    if [[ ",$current," != *",$3,"* ]]; then
        iniset "$IRONIC_CONF_FILE" "$1" "$2" "$3${current:+,$current}"
    fi
}

function configure_ironic_bmc {
    _append_list_option DEFAULT enabled_hardware_types container-ipmi
    _append_list_option DEFAULT enabled_deploy_interfaces container
    _append_list_option DEFAULT enabled_vendor_interfaces container
    iniset "$IRONIC_CONF_FILE" container image_cache_dir \
        "$IRONIC_DATA_DIR/container_rootfs_cache"
    iniset "$IRONIC_CONF_FILE" container report_dir \
        "$IRONIC_DATA_DIR/container_reports"
    if [[ -n "$IRONIC_BMC_KERNEL_MODULES" ]]; then
        iniset "$IRONIC_CONF_FILE" container default_kernel_modules \
            "$IRONIC_BMC_KERNEL_MODULES"
    fi
}

if is_service_enabled ir-cond; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing ironic-bmc"
        install_ironic_bmc
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring ironic-bmc"
        configure_ironic_bmc
    elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
        if is_service_enabled tempest; then
            iniset "$TEMPEST_CONFIG" baremetal_container enabled True
        fi
    fi
fi
