#!/usr/bin/env bash
# An emulated cluster on this machine, for runs that cross a real TCP stack:
#
#   scripts/cluster.sh up N [--bandwidth RATE]   N hosts h1..hN (idempotent)
#   scripts/cluster.sh shape RATE|none           re-shape every host's link
#   scripts/cluster.sh status                    hosts, addresses, shaping
#   scripts/cluster.sh down                      remove everything it made
#   scripts/cluster.sh agent HOST CMD...         Open MPI's launch agent (below)
#
# Each host is a network namespace (dtc-hI) with one veth link (eth0,
# 10.77.0.I/24) to a bridge in a switch namespace (dtc-sw). The machine
# itself joins the bridge as 10.77.0.254 so that mpirun, started here like
# on a cluster's login node, reaches the daemons it starts on the hosts. Only
# these addresses are used. RATE (tc's units: 100mbit, 1gbit) caps each
# host's link in both directions with a token bucket (tbf) on each end of its
# veth: the host's egress on its side, its ingress as the switch's egress.
# The names h1..hN go to /etc/hosts, marked "# dtrain-cluster dtc". A second
# cluster beside it (the tests') takes other names from the environment:
# DT_CLUSTER (namespace prefix, default dtc), DT_CLUSTER_HOST (host name
# prefix, default h), DT_CLUSTER_NET (its /24, default 10.77.0).
#
# dtrain launch --hosts h1:2,h2:2 --launch-agent "$PWD/scripts/cluster.sh agent"
# starts ranks on these hosts: Open MPI's rsh launcher runs "AGENT HOST
# orted ..." where a real cluster runs "ssh HOST orted ...", and the agent
# runs the daemon inside that host's namespace. Everything else (files,
# processes, /dev/shm) is shared with the machine, so the same binary and
# paths work on every host, as on a cluster with a shared file system.
set -euo pipefail

P=${DT_CLUSTER:-dtc}
H=${DT_CLUSTER_HOST:-h}
NET=${DT_CLUSTER_NET:-10.77.0}
GW=$NET.254
SW=$P-sw
MARK="# dtrain-cluster $P"
MTU_BURST=64kb # tbf's bucket: 1.5 ms of a 1 Gbit/s link, enough for TSO-sized packets

die() {
    echo "cluster.sh: $*" >&2
    exit 2
}

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces and tc): run it as root"
    command -v ip > /dev/null || die "needs iproute2's ip (apt-get install iproute2)"
    command -v tc > /dev/null || die "needs iproute2's tc (apt-get install iproute2)"
}

hosts() { ip netns list 2> /dev/null | sed -n "s/^$P-$H\\([0-9]*\\)\\b.*/\\1/p" | sort -n; }

in_sw() { ip netns exec "$SW" "$@"; }

# tbf on one interface (in namespace $1, device $2) or none.
shape_dev() {
    local ns=$1 dev=$2 rate=$3
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2> /dev/null || true
    [ "$rate" = none ] && return 0
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$MTU_BURST" latency 50ms ||
        die "tc cannot shape $dev in $ns to '$rate' (tc's units: 100mbit, 1gbit)"
}

shape_host() {
    shape_dev "$P-$H$1" eth0 "$2"
    shape_dev "$SW" "$P-p$1" "$2"
}

switch_up() {
    ip netns list | grep -q "^$SW\\b" || ip netns add "$SW" || die "cannot create network namespaces here"
    in_sw ip link show br0 > /dev/null 2>&1 || in_sw ip link add br0 type bridge || die "cannot create a bridge"
    in_sw ip link set br0 up
    in_sw ip link set lo up
    if ! ip link show "$P-gw" > /dev/null 2>&1; then
        ip link add "$P-gw" type veth peer name "$P-gwp"
        ip link set "$P-gwp" netns "$SW"
        in_sw ip link set "$P-gwp" master br0
        in_sw ip link set "$P-gwp" up
        ip addr add "$GW/24" dev "$P-gw"
        ip link set "$P-gw" up
    fi
}

host_up() {
    local i=$1 ns=$P-$H$1
    ip netns list | grep -q "^$ns\b" && return 0
    ip netns add "$ns"
    ip link add "$P-p$i" netns "$SW" type veth peer name eth0 netns "$ns"
    in_sw ip link set "$P-p$i" master br0
    in_sw ip link set "$P-p$i" up
    ip netns exec "$ns" ip addr add "$NET.$i/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
}

hosts_file() {
    local tmp
    tmp=$(mktemp /etc/hosts.dtc.XXXXXX)
    grep -v " $MARK$" /etc/hosts > "$tmp" || true
    for i in "$@"; do echo "$NET.$i $H$i $MARK" >> "$tmp"; done
    cat "$tmp" > /etc/hosts # in place: /etc/hosts may be a bind mount
    rm -f "$tmp"
}

cmd_up() {
    local n=${1:-} rate=none
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: give the number of hosts (1-200): up N"
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        --bandwidth) rate=${2:?--bandwidth needs a rate, e.g. 1gbit}; shift 2 ;;
        --bandwidth=*) rate=${1#*=}; shift ;;
        *) die "up: unknown flag '$1' (--bandwidth RATE)" ;;
        esac
    done
    need_root
    switch_up
    for i in $(hosts); do [ "$i" -le "$n" ] || host_down "$i"; done
    for i in $(seq 1 "$n"); do
        host_up "$i"
        shape_host "$i" "$rate"
    done
    hosts_file $(seq 1 "$n")
    cmd_status
}

host_down() {
    ip netns del "$P-$H$1" 2> /dev/null || true
    in_sw ip link del "$P-p$1" 2> /dev/null || true
}

cmd_down() {
    need_root
    for i in $(hosts); do host_down "$i"; done
    ip link del "$P-gw" 2> /dev/null || true
    ip netns del "$SW" 2> /dev/null || true
    grep -q " $MARK$" /etc/hosts 2> /dev/null && hosts_file
    echo "cluster: down"
}

cmd_shape() {
    local rate=${1:?shape needs a rate (100mbit, 1gbit) or none}
    need_root
    [ -n "$(hosts)" ] || die "shape: no cluster (scripts/cluster.sh up N first)"
    for i in $(hosts); do shape_host "$i" "$rate"; done
    cmd_status
}

cmd_status() {
    local list
    list=$(hosts)
    if [ -z "$list" ]; then
        echo "cluster: down"
        return 0
    fi
    for i in $list; do
        local q
        q=$(ip netns exec "$P-$H$i" tc qdisc show dev eth0 | sed -n 's/.*tbf.*rate \([^ ]*\).*/\1/p')
        echo "$H$i $NET.$i namespace $P-$H$i link ${q:-unshaped}"
    done
    local env=""
    [ "$P" = dtc ] && [ "$H" = h ] || env="DT_CLUSTER=$P DT_CLUSTER_HOST=$H "
    echo "launch: ${env}dtrain launch --hosts ${H}1:2,${H}2:2 --launch-agent \"$(realpath "$0") agent\" -- train ..."
}

# Open MPI's rsh launcher: AGENT HOST COMMAND... (the command is one string
# for a remote shell, as ssh would get it).
cmd_agent() {
    local host=${1:?agent: no host}
    shift
    local ns=$P-$host
    ip netns list | grep -q "^$ns\b" || die "agent: no host '$host' in the cluster (scripts/cluster.sh status)"
    # Its own host name (a UTS namespace) too: Open MPI names its shared-memory
    # files after the host, and two hosts called alike would share them.
    exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $host && exec /bin/sh -c \"\$0\"" "$*"
}

case ${1:-} in
up) shift; cmd_up "$@" ;;
down) cmd_down ;;
shape) shift; cmd_shape "$@" ;;
status) cmd_status ;;
agent) shift; cmd_agent "$@" ;;
*) usage ;;
esac
