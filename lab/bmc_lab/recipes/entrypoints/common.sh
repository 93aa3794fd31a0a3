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
#
# What the shell entrypoints of the lab recipes share (POSIX sh: the
# images' /bin/sh is dash).  Sourced, with PROG set, from
# /usr/local/lib/bmc-recipe/common.sh (BMC_RECIPE_LIB overrides the
# directory, for the unit tests).

# die MESSAGE...: say why on stderr and end the run with status 2.
die() {
    echo "$PROG: $*" >&2
    exit 2
}

# whole VAR NAME DEFAULT MIN MAX: VAR becomes the environment variable
# NAME (DEFAULT when unset or empty) as a whole number from MIN to MAX,
# or the run ends with a message naming NAME.
whole() {
    eval "_whole=\${$2:-}"
    [ -n "$_whole" ] || _whole=$3
    case $_whole in
        *[!0-9]*) die "$2 must be a whole number from $4 to $5, got '$_whole'" ;;
    esac
    # Leading zeros are not octal here; 10 digits at most: no overflow.
    _whole=$(printf '%s' "$_whole" | sed 's/^0*//')
    [ -n "$_whole" ] || _whole=0
    if [ ${#_whole} -gt 10 ] || [ "$_whole" -lt "$4" ] \
            || [ "$_whole" -gt "$5" ]; then
        die "$2 must be from $4 to $5, got $_whole"
    fi
    eval "$1=\$_whole"
}

# need TOOL...: each must be on PATH.
need() {
    for _tool in "$@"; do
        command -v "$_tool" >/dev/null 2>&1 \
            || die "$_tool is missing from the image"
    done
}

now() {
    date +%s.%N
}

# seconds START END: END - START, three decimals.
seconds() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'
}

# token TEXT: TEXT with only the characters a JSON string may hold
# unescaped and a name or version needs.
token() {
    printf '%s' "$1" | tr -cd 'A-Za-z0-9._:+,/ -' | cut -c1-80
}

# thp FILE: the selected value ([x]) of a transparent_hugepage file.
thp() {
    _thp=$(sed -n 's/.*\[\([a-z+]*\)\].*/\1/p' \
        "/sys/kernel/mm/transparent_hugepage/$1" 2>/dev/null)
    echo "${_thp:-unknown}"
}
