#!/bin/bash
# Regenerate upper-constraints.txt: resolve every requirement of the
# repository's distributions (and the build and test tools) against the
# package index and pin the result.  libvirt-python and virtualbmc cannot
# be resolved without building libvirt-python (their metadata needs
# libvirt-dev), so they are pinned to their latest release by name.
#
#   tools/update-constraints.sh        # rewrites upper-constraints.txt
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install --quiet --upgrade pip
# The repository's own distributions are not on the index: drop them.
reqs=$(cat requirements.txt common/requirements.txt ipa_hardware_manager/requirements.txt \
           client/requirements.txt \
           lab/requirements.txt test-requirements.txt doc/requirements.txt \
       | sed -e 's/#.*//' -e 's/[[:space:]]*$//' \
       | grep -v -E '^(ironic-bmc|$)')
# shellcheck disable=SC2086
"$pip" install --dry-run --ignore-installed --quiet --only-binary=:all: \
    --report "$work/report.json" $reqs 'cliff>=2.8' 'pyzmq>=19' \
    diskimage-builder reno sphinx setuptools wheel
latest() {
    "$pip" index versions "$1" 2>/dev/null | sed -n '1s/.*(\(.*\))/\1/p'
}
{
    sed -n '1,/^# Regenerate/p' upper-constraints.txt
    {
        "$work/venv/bin/python" - "$work/report.json" <<'PY'
import json
import sys
for item in json.load(open(sys.argv[1]))['install']:
    print('%s===%s' % (item['metadata']['name'], item['metadata']['version']))
PY
        echo "libvirt-python===$(latest libvirt-python)"
        echo "virtualbmc===$(latest virtualbmc)"
    } | sort -f
} > "$work/uc.txt"
mv "$work/uc.txt" upper-constraints.txt
echo "upper-constraints.txt: $(grep -c === upper-constraints.txt) pins"
