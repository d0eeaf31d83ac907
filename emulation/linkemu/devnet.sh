#!/bin/bash
# devnet.sh - throw-away dev topology for measuring pqs-linkemu by hand and
# from tests/linkemu.  Everything is named pqs-<ID>-*.
#
#   devnet.sh up ID [MTU]   create namespaces pqs-ID-client, pqs-ID-link, pqs-ID-server
#                           client veth pqs-ID-c (10.77.0.1/24)  <->  pqs-ID-la  [link ns]
#                           server veth pqs-ID-s (10.77.0.2/24)  <->  pqs-ID-lb  [link ns]
#                           run pqs-linkemu in pqs-ID-link with --a pqs-ID-la --b pqs-ID-lb
#   devnet.sh direct ID [MTU]  like up, but client and server joined by one veth pair
#                           (pqs-ID-c <-> pqs-ID-s, no link namespace): the baseline
#   devnet.sh down ID       delete all of the above (safe to repeat)
#   devnet.sh exec ID ROLE CMD...   ip netns exec pqs-ID-ROLE CMD...
#
# ID: 1..8 characters [a-z0-9] (interface names are limited to 15 characters).
# Offloads are off on every veth, neighbours are static, IPv6 is disabled,
# endpoint TCP buffers are raised to 64 MB so big BDPs are not capped.
set -euo pipefail

CLIENT_IP=10.77.0.1
SERVER_IP=10.77.0.2

die() { echo "devnet.sh: $*" >&2; exit 1; }

check_id() {
	[[ "$1" =~ ^[a-z0-9]{1,8}$ ]] || die "bad ID '$1' (1..8 characters a-z0-9)"
}

offloads_off() { # ns dev
	ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off rx off \
		>/dev/null 2>&1 || ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null
}

ns_base() { # ns
	ip netns add "$1"
	ip netns exec "$1" ip link set lo up
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
}

endpoint_tune() { # ns
	ip netns exec "$1" sysctl -qw net.ipv4.tcp_rmem="4096 131072 67108864"
	ip netns exec "$1" sysctl -qw net.ipv4.tcp_wmem="4096 16384 67108864"
	ip netns exec "$1" sysctl -qw net.core.rmem_max=67108864 2>/dev/null || true
	ip netns exec "$1" sysctl -qw net.core.wmem_max=67108864 2>/dev/null || true
}

mac_of() { # ns dev
	ip netns exec "$1" cat "/sys/class/net/$2/address"
}

static_neigh() { # id client_dev server_dev
	local id=$1 cdev=$2 sdev=$3
	local cmac smac
	cmac=$(mac_of "pqs-$id-client" "$cdev")
	smac=$(mac_of "pqs-$id-server" "$sdev")
	ip netns exec "pqs-$id-client" ip neigh replace "$SERVER_IP" lladdr "$smac" dev "$cdev" nud permanent
	ip netns exec "pqs-$id-server" ip neigh replace "$CLIENT_IP" lladdr "$cmac" dev "$sdev" nud permanent
}

# links_up ID MTU CLIENT_NS SERVER_NS "NS DEV"...: each DEV up in its NS with MTU and no
# offloads; then the client's and the server's address, tuning and static neighbours.
links_up() {
	local id=$1 mtu=$2 c=$3 s=$4 pair
	shift 4
	for pair in "$@"; do
		set -- $pair
		ip netns exec "$1" ip link set "$2" mtu "$mtu"
		offloads_off "$1" "$2"
		ip netns exec "$1" ip link set "$2" up
	done
	ip netns exec "$c" ip addr add "$CLIENT_IP/24" dev "pqs-$id-c"
	ip netns exec "$s" ip addr add "$SERVER_IP/24" dev "pqs-$id-s"
	endpoint_tune "$c"; endpoint_tune "$s"
	static_neigh "$id" "pqs-$id-c" "pqs-$id-s"
}

up() {
	local id=$1 mtu=${2:-1500}
	check_id "$id"
	ip netns list | grep -q "^pqs-$id-" && die "pqs-$id-* exists; run: devnet.sh down $id"
	local c="pqs-$id-client" l="pqs-$id-link" s="pqs-$id-server"
	ns_base "$c"; ns_base "$l"; ns_base "$s"
	ip link add "pqs-$id-c" netns "$c" type veth peer name "pqs-$id-la" netns "$l"
	ip link add "pqs-$id-s" netns "$s" type veth peer name "pqs-$id-lb" netns "$l"
	links_up "$id" "$mtu" "$c" "$s" "$c pqs-$id-c" "$l pqs-$id-la" "$l pqs-$id-lb" "$s pqs-$id-s"
	echo "devnet $id up: $c ($CLIENT_IP, pqs-$id-c) <-> $l (pqs-$id-la | pqs-$id-lb) <-> $s ($SERVER_IP, pqs-$id-s), mtu $mtu"
}

direct() {
	local id=$1 mtu=${2:-1500}
	check_id "$id"
	ip netns list | grep -q "^pqs-$id-" && die "pqs-$id-* exists; run: devnet.sh down $id"
	local c="pqs-$id-client" s="pqs-$id-server"
	ns_base "$c"; ns_base "$s"
	ip link add "pqs-$id-c" netns "$c" type veth peer name "pqs-$id-s" netns "$s"
	links_up "$id" "$mtu" "$c" "$s" "$c pqs-$id-c" "$s pqs-$id-s"
	echo "devnet $id direct: $c ($CLIENT_IP) <-> $s ($SERVER_IP), mtu $mtu"
}

down() {
	local id=$1
	check_id "$id"
	local ns
	for ns in "pqs-$id-client" "pqs-$id-link" "pqs-$id-server"; do
		if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
			# processes still inside would keep veths alive: list them, do not kill
			local pids
			pids=$(ip netns pids "$ns" 2>/dev/null || true)
			[ -n "$pids" ] && echo "devnet.sh: warning: processes still in $ns: $pids" >&2
			ip netns del "$ns"
		fi
	done
}

cmd=${1:-}
case "$cmd" in
	up) [ $# -ge 2 ] || die "usage: devnet.sh up ID [MTU]"; up "$2" "${3:-1500}" ;;
	direct) [ $# -ge 2 ] || die "usage: devnet.sh direct ID [MTU]"; direct "$2" "${3:-1500}" ;;
	down) [ $# -ge 2 ] || die "usage: devnet.sh down ID"; down "$2" ;;
	exec) [ $# -ge 4 ] || die "usage: devnet.sh exec ID ROLE CMD..."; check_id "$2"
	      id=$2 role=$3; shift 3; exec ip netns exec "pqs-$id-$role" "$@" ;;
	*) die "usage: devnet.sh up|direct|down|exec ID ..." ;;
esac
