#!/bin/bash
# devstack plugin of ironic-bmc: a devstack whose tenants boot container
# images on bare metal through Nova.
#
#   enable_plugin ironic https://opendev.org/openstack/ironic
#   enable_plugin ironic-bmc https://opendev.org/x/ironic-bmc
#
# Phases (devstack runs each phase for every plugin in enable_plugin order,
# sourcing plugin.sh in stack.sh's shell, so ironic's lib/ironic functions
# and variables are there when ours run):
#
# stack install      install bmc-common and ironic-bmc next to ironic; build
#                    the agent ramdisk and the kernel artifact, assemble the
#                    deploy kernel/ramdisk (before ironic's extra phase
#                    uploads the deploy ramdisk and cleans the nodes).
# stack post-config  [container] of ironic.conf; checks of what ironic's
#                    configure_ironic wrote from our settings.
# stack extra        (after ironic has enrolled and cleaned its nodes) the
#                    deploy ramdisk in Glance, deploy templates, the nodes
#                    switched to our hardware types and interfaces, flavors,
#                    the demo image; wait until Placement sees the nodes.
# stack test-config  [baremetal_container] of tempest.conf.
#
# Every step looks before it creates: stack.sh may be run again.

_IRONIC_BMC_XTRACE=$(set +o | grep xtrace)
set -o xtrace

# --- helpers -----------------------------------------------------------------

function _ironic_bmc_warn {
    # _ironic_bmc_warn LINENO MESSAGE...: devstack's warn prints its second
    # argument only and returns the status of the command before it (a
    # failed "if" condition would stop stack.sh under errexit).
    warn "$1" "${*:2}" || true
}

function _ironic_bmc_baremetal {
    # Ironic's operator API: system scope when ironic enforces scope (the
    # cloud name lib/ironic chose, IRONIC_OS_CLOUD).
    openstack --os-cloud "${IRONIC_OS_CLOUD:-devstack-system-admin}" \
        baremetal "$@"
}

function _ironic_bmc_openstack {
    # Glance, Nova flavors, Keystone: the project-scoped admin.
    openstack --os-cloud devstack-admin "$@"
}

function _ironic_bmc_python {
    # The interpreter ironic-bmc was installed for (devstack's global venv).
    local py
    py="$(get_python_exec_prefix)/python3"
    if [[ ! -x "$py" ]]; then
        py=$(command -v python3)
    fi
    echo "$py"
}

function _ironic_bmc_trait {
    # Tunables profile -> the trait and deploy template name that
    # ironic-bmc-deploy-templates uses: thp-never -> CUSTOM_BMC_TUNABLES_THP_NEVER.
    local name=${1^^}
    echo "CUSTOM_BMC_TUNABLES_${name//[^A-Z0-9]/_}"
}

function _ironic_bmc_traits {
    local profile
    for profile in $IRONIC_BMC_TUNABLES_PROFILES; do
        _ironic_bmc_trait "$profile"
    done
}

function _ironic_bmc_placement_rc {
    # Ironic resource class -> Placement's name for it, as Nova's ironic
    # driver normalizes it.  (lib/ironic only upper-cases
    # IRONIC_DEFAULT_RESOURCE_CLASS, which breaks on "-": one reason the
    # plugin does not put its class in that variable.)
    local rc=${IRONIC_BMC_RESOURCE_CLASS^^}
    echo "CUSTOM_${rc//[^A-Z0-9_]/_}"
}

function _ironic_bmc_conf_list_add {
    # _ironic_bmc_conf_list_add SECTION OPTION VALUE: append VALUE to a list
    # option of ironic.conf unless it is there; says so when it was not.
    local current
    current=$(iniget "$IRONIC_CONF_FILE" "$1" "$2")
    if [[ -z "$current" ]]; then
        # Not written at all: appending would replace Ironic's default list.
        die $LINENO "$IRONIC_CONF_FILE has no [$1]$2: ironic's devstack" \
            "library no longer writes it; ironic-bmc needs $3 in it"
    fi
    if [[ ",$current," != *",$3,"* ]]; then
        _ironic_bmc_warn $LINENO "[$1]$2 of $IRONIC_CONF_FILE lacked $3 (ironic's" \
            "devstack library did not use the variable devstack/settings" \
            "of ironic-bmc sets); adding it"
        iniset "$IRONIC_CONF_FILE" "$1" "$2" "${current:+$current,}$3"
    fi
}

function _ironic_bmc_concat_initrds {
    # _ironic_bmc_concat_initrds OUT PART...: one initrd file of several
    # archives.  Linux unpacks concatenated initramfs archives in order;
    # each has to start on a 4-byte boundary.
    local out=$1
    shift
    local part size
    : > "$out.tmp"
    for part in "$@"; do
        size=$(stat -c %s "$out.tmp")
        if (( size % 4 )); then
            head -c $(( 4 - size % 4 )) /dev/zero >> "$out.tmp"
        fi
        cat "$part" >> "$out.tmp"
    done
    chmod 0644 "$out.tmp"
    mv -f "$out.tmp" "$out"
}

function _ironic_bmc_glance_file {
    # _ironic_bmc_glance_file PATH FORMAT: the ID of a public Glance image
    # with the content of PATH, named after it; uploaded unless an image of
    # that name and checksum exists (ironic's upload_baremetal_ironic_deploy
    # may have uploaded the same file already).
    local path=$1 fmt=$2
    local name sum id
    name=$(basename "$path")
    sum=$(md5sum "$path" | cut -d' ' -f1)
    id=$(_ironic_bmc_openstack image list --name "$name" --long \
        -f value -c ID -c Checksum | awk -v sum="$sum" '$2 == sum {print $1; exit}')
    if [[ -z "$id" ]]; then
        id=$(_ironic_bmc_openstack image create "$name" --public \
            --disk-format "$fmt" --container-format "$fmt" \
            --file "$(readlink -f "$path")" -f value -c id)
    fi
    die_if_not_set $LINENO id "Failed to upload $path to Glance"
    echo "$id"
}

# --- stack install -------------------------------------------------------------

function install_ironic_bmc {
    # The conductor plugin and the definitions it shares with the agent.
    # The node side (ipa_hardware_manager/) goes into the agent ramdisk,
    # the lab nowhere, the tempest plugin into tempest's venv
    # (TEMPEST_PLUGINS, settings).
    setup_develop "$IRONIC_BMC_DIR/common"
    setup_develop "$IRONIC_BMC_DIR"
    # What the conductor builds rootfs artifacts and their dm-verity hash
    # trees with; genisoimage builds the config drive of a deploy given as
    # JSON (openstack baremetal node deploy --config-drive).
    install_package erofs-utils squashfs-tools cryptsetup-bin zstd lz4 \
        genisoimage
    # The openstack CLI plugin (openstack baremetal container ...).
    setup_develop "$IRONIC_BMC_DIR/client"
    if is_service_enabled horizon; then
        # The Container runs panel; Horizon reads its enabled file when it
        # starts, after the install phase.
        setup_develop "$IRONIC_BMC_DIR/dashboard"
        cp "$IRONIC_BMC_DIR/dashboard/ironic_bmc_dashboard/enabled/"_[0-9]*.py \
            "$HORIZON_DIR/openstack_dashboard/local/enabled/"
    fi
}

function configure_ironic_bmc_api {
    iniset "$IRONIC_CONF_FILE" container_api host_ip "$SERVICE_LISTEN_ADDRESS"
    iniset "$IRONIC_CONF_FILE" container_api port "$IRONIC_BMC_API_PORT"
    iniset "$IRONIC_CONF_FILE" container_api auth_strategy keystone
}

function start_ironic_bmc_api {
    # ironic.conf's [keystone_authtoken] (ironic's devstack wrote it) checks
    # the callers' tokens.
    get_or_create_service ironic-bmc baremetal-container \
        "Bare-metal container runs"
    get_or_create_endpoint baremetal-container "$REGION_NAME" \
        "$IRONIC_BMC_API_URL"
    run_process ir-bmc-api \
        "$(which ironic-bmc-api) --config-file $IRONIC_CONF_FILE"
    if ! wait_for_service "$SERVICE_TIMEOUT" "$IRONIC_BMC_API_URL"; then
        die $LINENO "ironic-bmc-api did not start on $IRONIC_BMC_API_URL"
    fi
}

function build_ironic_bmc_deploy_images {
    local cache=$IRONIC_BMC_DATA_DIR/agent
    local prefix=$cache/bmc-agent
    mkdir -p "$cache"

    if ! is_ubuntu; then
        die $LINENO "The agent ramdisk build (debootstrap, apt) needs a" \
            "Debian or Ubuntu host; set IRONIC_BMC_BUILD_AGENT_RAMDISK=False" \
            "and put a prebuilt kernel and ramdisk at IRONIC_BMC_DEPLOY_KERNEL" \
            "and IRONIC_BMC_DEPLOY_RAMDISK"
    fi
    # Host tools of the build (the script would apt-get them itself).
    install_package debootstrap cpio

    # sudo drops the environment: hand over the proxies and the build
    # options from local.conf explicitly.
    local -a build_env=()
    local var
    for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
        if [[ -n "${!var:-}" ]]; then
            build_env+=("$var=${!var}")
        fi
    done
    local -a extra_env=()
    read -r -a extra_env <<< "$IRONIC_BMC_AGENT_BUILD_ENV"
    build_env+=("${extra_env[@]}")

    # Cached by a hash of its inputs: returns at once when up to date.
    # diskimage-builder needs root.
    echo_summary "Building the ironic-bmc agent ramdisk (first build: minutes)"
    sudo env "${build_env[@]}" bash "$IRONIC_BMC_DIR/elements/build-agent-ramdisk.sh" \
        -o "$prefix" -w "$cache/build" \
        || die $LINENO "The agent ramdisk build failed (log: $prefix.build.log)"

    # The ramdisk has no /lib/modules (one ramdisk for many kernels): the
    # modules come from the kernel artifact of the deploy kernel.
    local kdir
    local -a kernel_src=()
    if [[ -n "$IRONIC_BMC_AGENT_KERNEL_DEB" ]]; then
        kdir=$cache/kernel-deb-$(basename "$IRONIC_BMC_AGENT_KERNEL_DEB" .deb)
        kernel_src=(--deb "$IRONIC_BMC_AGENT_KERNEL_DEB")
    else
        local version=${IRONIC_BMC_AGENT_KERNEL_VERSION:-$(uname -r)}
        kdir=$cache/kernel-$version
        kernel_src=(--installed "$version")
    fi
    if [[ ! -s "$kdir/vmlinuz" || ! -s "$kdir/modules.cpio.gz" ]]; then
        # As root: /boot/vmlinuz-* is readable by root only on Ubuntu.
        sudo "$(_ironic_bmc_python)" -m ironic_bmc.kernel.artifact \
            "${kernel_src[@]}" --out "$kdir" --modules agent \
            || die $LINENO "Could not make the kernel artifact (${kernel_src[*]})"
        sudo chown -R "$STACK_USER" "$kdir"
    fi

    # Ironic's own interfaces (cleaning, the direct fallback of autodetect)
    # boot one ramdisk, so the modules go into the same file; container
    # deploys boot it too ([container]default_kernel_modules stays unset,
    # or the modules would be sent twice).
    install -m 0644 "$kdir/vmlinuz" "$IRONIC_BMC_DEPLOY_KERNEL"
    _ironic_bmc_concat_initrds "$IRONIC_BMC_DEPLOY_RAMDISK" \
        "$prefix.initramfs" "$kdir/modules.cpio.gz"
    if [[ "${IRONIC_DEPLOY_RAMDISK:-}" != "$IRONIC_BMC_DEPLOY_RAMDISK" ]]; then
        _ironic_bmc_warn $LINENO "IRONIC_DEPLOY_RAMDISK is $IRONIC_DEPLOY_RAMDISK, not the" \
            "ironic-bmc ramdisk: nodes are cleaned with it at enrollment;" \
            "the nodes ironic-bmc switches get $IRONIC_BMC_DEPLOY_RAMDISK"
    fi
}

# --- stack post-config -----------------------------------------------------

function configure_ironic_bmc {
    case "$IRONIC_BMC_DEPLOY_INTERFACE" in
        autodetect|container) ;;
        *) die $LINENO "IRONIC_BMC_DEPLOY_INTERFACE must be autodetect or" \
            "container, not $IRONIC_BMC_DEPLOY_INTERFACE" ;;
    esac
    if [[ "$IRONIC_BMC_NODE_COUNT" != "all" \
            && ! "$IRONIC_BMC_NODE_COUNT" =~ ^[0-9]+$ ]]; then
        die $LINENO "IRONIC_BMC_NODE_COUNT must be \"all\" or a number," \
            "not $IRONIC_BMC_NODE_COUNT"
    fi

    # devstack/settings put these in ironic's variables, which ironic's
    # configure_ironic_conductor wrote a moment ago; a safety net should
    # ironic's library stop reading one of them.
    _ironic_bmc_conf_list_add DEFAULT enabled_hardware_types container-ipmi
    _ironic_bmc_conf_list_add DEFAULT enabled_deploy_interfaces container
    _ironic_bmc_conf_list_add DEFAULT enabled_vendor_interfaces container
    if [[ "$IRONIC_BMC_DEPLOY_INTERFACE" == "autodetect" ]]; then
        _ironic_bmc_conf_list_add DEFAULT enabled_deploy_interfaces autodetect
        local detect
        detect=$(iniget "$IRONIC_CONF_FILE" DEFAULT autodetect_deploy_interfaces)
        if [[ "$detect" != container* ]]; then
            # Ironic tries them in order; the container interface detects
            # container images, so it goes first.
            iniset "$IRONIC_CONF_FILE" DEFAULT autodetect_deploy_interfaces \
                "$IRONIC_AUTODETECT_DEPLOY_INTERFACES"
        fi
    fi

    # Next to [deploy]http_root ($IRONIC_DATA_DIR/httpboot): a deploy
    # publishes its rootfs artifact there by a hard link, which needs the
    # same filesystem (across filesystems it is a copy).
    mkdir -p "$IRONIC_DATA_DIR/container_rootfs_cache" \
        "$IRONIC_DATA_DIR/container_reports"
    iniset "$IRONIC_CONF_FILE" container image_cache_dir \
        "$IRONIC_DATA_DIR/container_rootfs_cache"
    iniset "$IRONIC_CONF_FILE" container report_dir \
        "$IRONIC_DATA_DIR/container_reports"
    # [container] options set only when their variable is not empty.
    local pair var
    for pair in insecure_registries:IRONIC_BMC_INSECURE_REGISTRIES \
            allowed_registries:IRONIC_BMC_ALLOWED_REGISTRIES \
            credential_registries:IRONIC_BMC_CREDENTIAL_REGISTRIES \
            tunables_profile_dirs:IRONIC_BMC_TUNABLES_PROFILE_DIRS \
            default_kernel_modules:IRONIC_BMC_KERNEL_MODULES; do
        var=${pair#*:}
        if [[ -n "${!var:-}" ]]; then
            iniset "$IRONIC_CONF_FILE" container "${pair%%:*}" "${!var}"
        fi
    done

    # What the container interface refuses at validate; said now rather
    # than at the first deploy.  (DHCP, iPXE and the HTTP server are
    # ironic's: [dhcp]dhcp_provider, [deploy]http_root/http_url.)
    local net=${IRONIC_NETWORK_INTERFACE:-${IRONIC_DEFAULT_NETWORK_INTERFACE:-}}
    if [[ -n "$net" && "$net" != "flat" && "$net" != "noop" ]]; then
        _ironic_bmc_warn $LINENO "The container deploy interface supports the flat and" \
            "noop network interfaces only (the agent must stay reachable" \
            "while the workload runs); nodes with network interface $net" \
            "are not switched to it"
    fi
    if [[ "${IRONIC_IPXE_ENABLED:-True}" != "True" \
            || ",${IRONIC_ENABLED_BOOT_INTERFACES:-ipxe}," != *",ipxe,"* ]]; then
        _ironic_bmc_warn $LINENO "The container deploy interface boots nodes through" \
            "iPXE: set IRONIC_IPXE_ENABLED=True and enable ipxe in" \
            "IRONIC_ENABLED_BOOT_INTERFACES, or no node is switched"
    fi
}

# --- stack extra -----------------------------------------------------------

function ironic_bmc_deploy_templates {
    if [[ -z "${IRONIC_BMC_TUNABLES_PROFILES// /}" ]]; then
        return 0
    fi
    local cmd
    cmd="$(get_python_exec_prefix)/ironic-bmc-deploy-templates"
    if [[ ! -x "$cmd" ]]; then
        cmd=$(command -v ironic-bmc-deploy-templates || true)
    fi
    if [[ -z "$cmd" ]]; then
        die $LINENO "ironic-bmc-deploy-templates is not installed: cannot" \
            "create the deploy templates of IRONIC_BMC_TUNABLES_PROFILES"
    fi
    local -a args=()
    local profile dir
    for profile in $IRONIC_BMC_TUNABLES_PROFILES; do
        args+=(--profile "$profile")
    done
    # The conductor's profile directories, so operator profiles resolve.
    for dir in ${IRONIC_BMC_TUNABLES_PROFILE_DIRS//,/ }; do
        args+=(--profile-dir "$dir")
    done
    # Creates missing templates, updates changed ones.  It authenticates
    # with keystoneauth's OS_* variables, not clouds.yaml (OS_CLOUD is
    # ignored): the admin of devstack's devstack-system-admin cloud, as
    # deploy templates are an operator API (project admin when ironic does
    # not enforce scope).  In a subshell without stack.sh's own OS_*
    # (a project scope would clash with the system scope).
    (
        local var
        for var in $(compgen -v OS_); do
            unset "$var"
        done
        export OS_AUTH_TYPE=password
        export OS_AUTH_URL=$KEYSTONE_SERVICE_URI
        export OS_USERNAME=admin
        export OS_PASSWORD=$ADMIN_PASSWORD
        export OS_USER_DOMAIN_ID=default
        export OS_REGION_NAME=$REGION_NAME
        export OS_INTERFACE=public
        if [[ "${IRONIC_ENFORCE_SCOPE:-True}" == "True" ]]; then
            export OS_SYSTEM_SCOPE=all
        else
            export OS_PROJECT_NAME=admin
            export OS_PROJECT_DOMAIN_ID=default
        fi
        if [[ -f "${SSL_BUNDLE_FILE:-}" ]]; then
            export OS_CACERT=$SSL_BUNDLE_FILE
        fi
        "$cmd" "${args[@]}"
    ) || die $LINENO "ironic-bmc-deploy-templates failed"
}

function ironic_bmc_switch_nodes {
    # ironic_bmc_switch_nodes KERNEL_ID RAMDISK_ID: put the nodes ironic's
    # enroll_nodes created (<prefix>-<n>, cleaned and available by now) on
    # our hardware types and interfaces.  Ironic allows changing the driver,
    # the interfaces and the resource class in enroll, manageable and
    # available.  Sets _IRONIC_BMC_SWITCHED to the number of nodes switched.
    local kernel_id=$1 ramdisk_id=$2
    _IRONIC_BMC_SWITCHED=0

    local prefix=node
    if declare -F get_ironic_node_prefix >/dev/null; then
        prefix=$(get_ironic_node_prefix)
    fi
    local names
    names=$(_ironic_bmc_baremetal node list -f value -c Name \
        | grep -E "^${prefix}-[0-9]+\$" | sort -V || true)
    if [[ "$IRONIC_BMC_NODE_COUNT" != "all" ]]; then
        names=$(echo "$names" | head -n "$IRONIC_BMC_NODE_COUNT")
    fi
    if [[ -z "$names" ]]; then
        _ironic_bmc_warn $LINENO "No node named $prefix-<n> to switch to container-ipmi"
        return 0
    fi

    local -a traits=()
    mapfile -t traits < <(_ironic_bmc_traits)
    local rc_name
    rc_name=$(_ironic_bmc_placement_rc)

    local name
    local bmc_uuid bmc_driver bmc_provision_state bmc_instance_uuid
    local bmc_network_interface bmc_boot_interface
    for name in $names; do
        bmc_uuid="" bmc_driver="" bmc_provision_state="" bmc_instance_uuid=""
        bmc_network_interface="" bmc_boot_interface=""
        local fields
        fields=$(_ironic_bmc_baremetal node show "$name" -f shell \
            --prefix bmc_ -c uuid -c driver -c provision_state \
            -c instance_uuid -c network_interface -c boot_interface) \
            || die $LINENO "Cannot show node $name"
        # bmc_uuid="...", quoted by the client's shell formatter.
        eval "$fields"

        local driver
        case "$bmc_driver" in
            ipmi|container-ipmi) driver=container-ipmi ;;
            redfish|container-redfish) driver=container-redfish ;;
            *)
                _ironic_bmc_warn $LINENO "Node $name: driver $bmc_driver has no container" \
                    "hardware type; not switched"
                continue ;;
        esac
        if [[ "$driver" == "container-redfish" \
                && ",$IRONIC_ENABLED_HARDWARE_TYPES," != *",container-redfish,"* ]]; then
            _ironic_bmc_warn $LINENO "Node $name: container-redfish is not enabled; not switched"
            continue
        fi
        if [[ -n "$bmc_instance_uuid" && "$bmc_instance_uuid" != "None" ]] \
                || [[ ! "$bmc_provision_state" =~ ^(enroll|manageable|available)$ ]]; then
            _ironic_bmc_warn $LINENO "Node $name is $bmc_provision_state (instance" \
                "$bmc_instance_uuid); not switched"
            continue
        fi
        if [[ "$bmc_network_interface" != "flat" && "$bmc_network_interface" != "noop" ]]; then
            _ironic_bmc_warn $LINENO "Node $name uses network interface" \
                "$bmc_network_interface; the container deploy interface" \
                "supports flat and noop only; not switched"
            continue
        fi
        if [[ "$bmc_boot_interface" != "ipxe" \
                && ",$IRONIC_ENABLED_BOOT_INTERFACES," != *",ipxe,"* ]]; then
            _ironic_bmc_warn $LINENO "Node $name boots with $bmc_boot_interface and ipxe" \
                "is not enabled; the container deploy interface needs it;" \
                "not switched"
            continue
        fi

        # One update: Ironic checks the interfaces against the new driver
        # (all of an ipmi node's are valid for container-ipmi, so nothing
        # is reset).
        local -a set_args=(--driver "$driver"
            --deploy-interface "$IRONIC_BMC_DEPLOY_INTERFACE"
            --vendor-interface container
            --boot-interface ipxe
            --resource-class "$IRONIC_BMC_RESOURCE_CLASS")
        if [[ -n "$kernel_id" && -n "$ramdisk_id" ]]; then
            set_args+=(--driver-info "deploy_kernel=$kernel_id")
            set_args+=(--driver-info "deploy_ramdisk=$ramdisk_id")
        fi
        if [[ "$IRONIC_IS_HARDWARE" == "False" ]]; then
            # The rootfs lives in RAM: with memory_mb the conductor refuses
            # images larger than [container]max_image_ram_fraction of it.
            set_args+=(--property "memory_mb=$IRONIC_VM_SPECS_RAM")
        fi
        _ironic_bmc_baremetal node set "$bmc_uuid" "${set_args[@]}" \
            || die $LINENO "Failed to switch node $name to $driver"
        if (( ${#traits[@]} )); then
            _ironic_bmc_baremetal node add trait "$bmc_uuid" "${traits[@]}"
        fi
        echo "Node $name: $driver, deploy $IRONIC_BMC_DEPLOY_INTERFACE," \
            "resource class $IRONIC_BMC_RESOURCE_CLASS ($rc_name)" \
            "${traits[*]:+traits ${traits[*]}}"
        _IRONIC_BMC_SWITCHED=$(( _IRONIC_BMC_SWITCHED + 1 ))
    done
}

function _ironic_bmc_flavor {
    # _ironic_bmc_flavor NAME [TRAIT]: a public flavor of one whole node of
    # IRONIC_BMC_RESOURCE_CLASS, with TRAIT required.
    local name=$1 trait=${2:-}
    if ! _ironic_bmc_openstack flavor show "$name" >/dev/null 2>&1; then
        local cpus=$IRONIC_VM_SPECS_CPU ram=$IRONIC_VM_SPECS_RAM
        if [[ "$IRONIC_IS_HARDWARE" == "True" ]]; then
            cpus=$IRONIC_HW_NODE_CPU
            ram=$IRONIC_HW_NODE_RAM
        fi
        # vcpus/ram are informative (the resources: properties below
        # replace them in scheduling); tenants may not boot a flavor of
        # disk 0 from an image (volume-backed only), hence disk 1.
        _ironic_bmc_openstack flavor create "$name" --public \
            --vcpus "$cpus" --ram "$ram" --disk 1
    fi
    local -a props=(
        --property "resources:$(_ironic_bmc_placement_rc)=1"
        --property resources:VCPU=0
        --property resources:MEMORY_MB=0
        --property resources:DISK_GB=0)
    if [[ -n "$trait" ]]; then
        props+=(--property "trait:$trait=required")
    fi
    _ironic_bmc_openstack flavor set "$name" "${props[@]}"
}

function ironic_bmc_create_flavors {
    _ironic_bmc_flavor "$IRONIC_BMC_FLAVOR"
    local profile
    for profile in $IRONIC_BMC_TUNABLES_PROFILES; do
        # Nova passes the required trait to Ironic (instance_info/traits),
        # which applies the deploy template of that name.
        _ironic_bmc_flavor "$IRONIC_BMC_FLAVOR.$profile" \
            "$(_ironic_bmc_trait "$profile")"
    done
}

function ironic_bmc_create_demo_image {
    if [[ -z "$IRONIC_BMC_DEMO_IMAGE" ]]; then
        return 0
    fi
    local id
    id=$(_ironic_bmc_openstack image list --name "$IRONIC_BMC_DEMO_IMAGE_NAME" \
        -f value -c ID | head -n 1)
    if [[ -z "$id" ]]; then
        # Glance keeps an image without data "queued" and Nova does not
        # boot those: a few bytes, never read (the properties say what runs).
        local data
        data=$(mktemp)
        echo "container image $IRONIC_BMC_DEMO_IMAGE; the data is not used" > "$data"
        id=$(_ironic_bmc_openstack image create "$IRONIC_BMC_DEMO_IMAGE_NAME" \
            --public --disk-format raw --container-format bare \
            --file "$data" -f value -c id)
        rm -f "$data"
        die_if_not_set $LINENO id "Failed to create the demo image"
    fi
    _ironic_bmc_openstack image set "$id" \
        --property "container_image=$IRONIC_BMC_DEMO_IMAGE" \
        --property "container_mode=$IRONIC_BMC_DEMO_MODE"
}

function ironic_bmc_wait_for_placement {
    # ironic_bmc_wait_for_placement COUNT: until Placement has COUNT free
    # providers of our resource class with all our traits.  nova-compute
    # reports a node's new resource class and traits on its next periodic
    # update (about a minute).
    local expected=$1
    if (( expected < 1 )); then
        return 0
    fi
    local query
    query="resources=$(_ironic_bmc_placement_rc):1"
    local traits
    traits=$(_ironic_bmc_traits | paste -sd, -)
    if [[ -n "$traits" ]]; then
        query+="&required=$traits"
    fi
    local token endpoint
    token=$(_ironic_bmc_openstack token issue -f value -c id)
    endpoint=$(_ironic_bmc_openstack endpoint list --service placement \
        --interface public -f value -c URL | head -n 1)
    die_if_not_set $LINENO endpoint "Cannot find the Placement endpoint"

    echo_summary "Waiting up to ${IRONIC_BMC_PLACEMENT_TIMEOUT}s for" \
        "Placement to offer $expected container nodes"
    local deadline
    deadline=$(( SECONDS + IRONIC_BMC_PLACEMENT_TIMEOUT ))
    local count
    while true; do
        # "required" needs Placement microversion 1.18.
        count=$(curl --noproxy '*' -s -H "X-Auth-Token: $token" \
            -H "OpenStack-API-Version: placement 1.18" \
            "$endpoint/resource_providers?$query" \
            | python3 -c 'import json, sys
print(len(json.load(sys.stdin).get("resource_providers", [])))' 2>/dev/null) \
            || count=0
        if (( ${count:-0} >= expected )); then
            return 0
        fi
        if (( SECONDS >= deadline )); then
            die $LINENO "Placement offers ${count:-0} of $expected nodes with" \
                "$query after ${IRONIC_BMC_PLACEMENT_TIMEOUT}s"
        fi
        sleep 15
    done
}

function ironic_bmc_extra {
    local subnode=False
    if [[ "${HOST_TOPOLOGY_ROLE:-}" == "subnode" ]]; then
        subnode=True
    fi

    local kernel_id="" ramdisk_id=""
    if [[ -s "$IRONIC_BMC_DEPLOY_KERNEL" && -s "$IRONIC_BMC_DEPLOY_RAMDISK" ]] \
            && is_service_enabled glance; then
        kernel_id=$(_ironic_bmc_glance_file "$IRONIC_BMC_DEPLOY_KERNEL" aki) \
            || die $LINENO "Failed to upload $IRONIC_BMC_DEPLOY_KERNEL"
        ramdisk_id=$(_ironic_bmc_glance_file "$IRONIC_BMC_DEPLOY_RAMDISK" ari) \
            || die $LINENO "Failed to upload $IRONIC_BMC_DEPLOY_RAMDISK"
    else
        _ironic_bmc_warn $LINENO "No ironic-bmc deploy ramdisk ($IRONIC_BMC_DEPLOY_RAMDISK):" \
            "nodes keep Ironic's deploy ramdisk, which needs the ironic-bmc" \
            "hardware manager for container deploys"
    fi

    if [[ "$subnode" == "False" ]]; then
        ironic_bmc_deploy_templates
    fi
    _IRONIC_BMC_SWITCHED=0
    if [[ "$IRONIC_BMC_SWITCH_NODES" == "True" ]]; then
        ironic_bmc_switch_nodes "$kernel_id" "$ramdisk_id"
    fi

    if is_service_enabled nova && [[ "$VIRT_DRIVER" == "ironic" ]]; then
        if [[ "$subnode" == "False" ]]; then
            ironic_bmc_create_flavors
        fi
        ironic_bmc_wait_for_placement "$_IRONIC_BMC_SWITCHED"
    fi
    if [[ "$subnode" == "False" ]] && is_service_enabled glance; then
        ironic_bmc_create_demo_image
    fi
}

# --- stack test-config -----------------------------------------------------

function ironic_bmc_configure_tempest {
    # The options of tempest_plugin/ironic_bmc_tempest_plugin/config.py.
    iniset "$TEMPEST_CONFIG" baremetal_container enabled True
    local driver=container-ipmi
    if [[ "${IRONIC_DEPLOY_DRIVER:-ipmi}" == "redfish" \
            && ",$IRONIC_ENABLED_HARDWARE_TYPES," == *",container-redfish,"* ]]; then
        driver=container-redfish
    fi
    iniset "$TEMPEST_CONFIG" baremetal_container driver "$driver"
    local profiles
    profiles=$(echo $IRONIC_BMC_TUNABLES_PROFILES | tr ' ' ',')
    iniset "$TEMPEST_CONFIG" baremetal_container tunables_profiles "$profiles"
    iniset "$TEMPEST_CONFIG" baremetal_container flavor "$IRONIC_BMC_FLAVOR"
    # The scenario test: tenants' servers on devstack's private network,
    # running the demo container (skipped when none is set).
    iniset "$TEMPEST_CONFIG" baremetal_container network \
        "${PRIVATE_NETWORK_NAME:-private}"
    if [[ -n "$IRONIC_BMC_DEMO_IMAGE" ]]; then
        iniset "$TEMPEST_CONFIG" baremetal_container container_image \
            "$IRONIC_BMC_DEMO_IMAGE"
    fi
}

# --- phases ------------------------------------------------------------------

if is_service_enabled ir-cond; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing ironic-bmc"
        install_ironic_bmc
        if [[ "$IRONIC_BMC_BUILD_AGENT_RAMDISK" == "True" ]]; then
            build_ironic_bmc_deploy_images
        fi
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring ironic-bmc"
        configure_ironic_bmc
        if is_service_enabled ir-bmc-api; then
            configure_ironic_bmc_api
        fi
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        if is_service_enabled ir-bmc-api; then
            echo_summary "Starting the container runs API"
            start_ironic_bmc_api
        fi
        echo_summary "Setting up ironic-bmc nodes, flavors and images"
        ironic_bmc_extra
    elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
        if is_service_enabled tempest; then
            ironic_bmc_configure_tempest
        fi
    fi

    if [[ "$1" == "unstack" ]]; then
        stop_process ir-bmc-api
    fi

    if [[ "$1" == "clean" ]]; then
        # The assembled files only; the build cache in IRONIC_BMC_DATA_DIR
        # makes the next build fast.
        rm -f "$IRONIC_BMC_DEPLOY_KERNEL" "$IRONIC_BMC_DEPLOY_RAMDISK"
    fi
fi

# Restore xtrace
$_IRONIC_BMC_XTRACE
