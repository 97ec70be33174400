# lib.sh - host-side control of a cluster of Soft-RoCE VMs (sourced, not run).
#
# cluster.sh is built on these functions; a fault scenario sources this file
# too, so that it can crash a node and start it again:
#
#   . tools/cluster-vm/lib.sh
#   cluster_init /tmp/out 3 1500 300 -- my-node-program ARGS   # writes /tmp/out/cluster.env
#   for i in 0 1 2; do cluster_start_node $i; done
#   sleep 30; cluster_kill_node 1             # power off node 1 (qemu SIGKILL)
#   cluster_start_node 1                      # same node number, IP, MAC: a new instance
#   cluster_wait_all; cluster_table
#
# A scenario in another shell only needs CLUSTER_DIR=OUTDIR and this file:
# every state lives in OUTDIR (cluster.env, cmd, node-I.* files), nothing in
# shell variables.
#
# Files per node I and instance K (K=0 first boot, 1 the first restart, ...):
#   node-I.out / node-I.err / node-I.console   (instance 0)
#   node-I.K.out / .err / .console             (instance K > 0)
#   node-I.pid   qemu's PID while the VM runs (qemu deletes it when it ends)
#   node-I.rc    exit code of the latest instance (absent while it runs)
#   node-I.inst  number of the latest instance
#   node-I.time  start and end (epoch seconds) of the latest instance
# share/ is the writable directory each VM mounts at the same path
# (CLUSTER_OUT inside the VMs).

CLUSTER_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_RUNNER=${CLUSTER_RUNNER:-$CLUSTER_LIB_DIR/../rxe-vm/run-in-rxe-vm.sh}

# cluster_init OUTDIR NODES MTU TIMEOUT [-e NAME=VALUE]... -- COMMAND [ARGS...]
# Chooses the segment (a dgram pair for 2 nodes, a multicast group on lo for
# more) and a free-looking port base, and records everything in OUTDIR.
cluster_init() {
	local dir=$1 n=$2 mtu=$3 t=$4 base net
	shift 4
	mkdir -p "$dir/share" || return 1
	CLUSTER_DIR=$(readlink -f -- "$dir")
	# Random base: two clusters (or a stale qemu) must not share a port.
	base=${CLUSTER_PORT_BASE:-$((40000 + (RANDOM % 2500) * 8))}
	net=${CLUSTER_NET:-}
	[ -n "$net" ] || { [ "$n" = 2 ] && net=pair || net=mcast; }
	{
		echo "CLUSTER_NODES=$n"
		echo "CLUSTER_MTU=$mtu"
		echo "CLUSTER_TIMEOUT=$t"
		echo "CLUSTER_PORT_BASE=$base"
		echo "CLUSTER_NET=$net"
	} > "$CLUSTER_DIR/cluster.env"
	# The command and -e options, quoted, one word a line (read back by start).
	: > "$CLUSTER_DIR/cmd"
	while [ $# -gt 0 ]; do
		case "$1" in
		-e) printf '%s\n' -e "$2" >> "$CLUSTER_DIR/cmd"; shift 2 ;;
		--) shift; printf '%s\n' -- "$@" >> "$CLUSTER_DIR/cmd"; break ;;
		*) echo "cluster_init: expected -e or --, got $1" >&2; return 1 ;;
		esac
	done
	export CLUSTER_DIR
}

cluster_load() {
	CLUSTER_DIR=${CLUSTER_DIR:?CLUSTER_DIR is not set}
	. "$CLUSTER_DIR/cluster.env"
}

cluster_ip() { echo "192.0.2.$((10 + $1))"; }
cluster_ips() { local i s=""; for ((i = 0; i < CLUSTER_NODES; i++)); do s+="${s:+ }$(cluster_ip $i)"; done; echo "$s"; }
# Locally administered, unicast; the last byte is the IP's.
cluster_mac() { printf '52:54:00:c0:02:%02x' $((10 + $1)); }

# The qemu -netdev backend of node I.
cluster_netdev() {
	local i=$1 b=$CLUSTER_PORT_BASE
	case "$CLUSTER_NET" in
	pair) # each VM sends to the other's port
		echo "dgram,local.type=inet,local.host=127.0.0.1,local.port=$((b + i)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((b + 1 - i))" ;;
	mcast) # one group on lo: every VM hears every frame (its own too)
		echo "socket,mcast=239.255.0.29:$b,localaddr=127.0.0.1" ;;
	*) echo "cluster: unknown CLUSTER_NET $CLUSTER_NET" >&2; return 1 ;;
	esac
}

# Path prefix of node I's files for instance K.
cluster_files() { [ "$2" = 0 ] && echo "$CLUSTER_DIR/node-$1" || echo "$CLUSTER_DIR/node-$1.$2"; }

# cluster_start_node I [TIMEOUT]: boot node I (again) in the background.
cluster_start_node() {
	local i=$1 k f netdev
	cluster_load
	local t=${2:-$CLUSTER_TIMEOUT}
	if cluster_node_running "$i"; then echo "cluster: node $i is running" >&2; return 1; fi
	k=0; [ -f "$CLUSTER_DIR/node-$i.inst" ] && k=$(( $(cat "$CLUSTER_DIR/node-$i.inst") + 1 ))
	f=$(cluster_files "$i" "$k")
	netdev=$(cluster_netdev "$i") || return 1
	local -a args=()
	mapfile -t args < "$CLUSTER_DIR/cmd"
	echo "$k" > "$CLUSTER_DIR/node-$i.inst"
	rm -f "$CLUSTER_DIR/node-$i.rc"
	echo "$(date +%s.%N)" > "$CLUSTER_DIR/node-$i.time"
	# The subshell outlives the caller's function: it records the exit code
	# and the end time, which is all the rest of this file reads.
	(
		RXE_VM_NIC=$netdev RXE_VM_MAC=$(cluster_mac "$i") RXE_VM_IP=$(cluster_ip "$i")/24 \
		RXE_VM_MTU=$CLUSTER_MTU RXE_VM_HOSTNAME=node$i RXE_VM_SHARE=$CLUSTER_DIR/share \
		RXE_VM_PIDFILE=$CLUSTER_DIR/node-$i.pid RXE_VM_CONSOLE=$f.console \
		RXE_VM_MEM=${RXE_VM_MEM:-1G} RXE_VM_SMP=${RXE_VM_SMP:-1} \
		RXE_VM_BOOT_SLACK=${RXE_VM_BOOT_SLACK:-90} \
			"$CLUSTER_RUNNER" -t "$t" \
			-e CLUSTER_NODE="$i" -e CLUSTER_NODES="$CLUSTER_NODES" -e CLUSTER_IPS="$(cluster_ips)" \
			-e CLUSTER_OUT="$CLUSTER_DIR/share" -e CLUSTER_INSTANCE="$k" \
			-e CLUSTER_TOOLS="$CLUSTER_LIB_DIR" "${args[@]}" \
			< /dev/null > "$f.out" 2> "$f.err"
		rc=$?
		echo "$(date +%s.%N)" >> "$CLUSTER_DIR/node-$i.time"
		echo "$rc" > "$CLUSTER_DIR/node-$i.rc"
	) &
	echo "$!" > "$CLUSTER_DIR/node-$i.wpid"
}

# Running = started and no exit code recorded yet (the qemu PID file appears
# only once qemu is up, so it cannot tell a booting node from a dead one).
cluster_node_running() {
	[ -f "$CLUSTER_DIR/node-$1.inst" ] && [ ! -f "$CLUSTER_DIR/node-$1.rc" ]
}

# cluster_wait_node I [SECONDS]: wait for node I's latest instance to end;
# prints nothing, returns its exit code (or 124 if still running at SECONDS).
cluster_wait_node() {
	local i=$1 limit=${2:-} t0=$SECONDS
	while cluster_node_running "$i"; do
		[ -n "$limit" ] && [ $((SECONDS - t0)) -ge "$limit" ] && return 124
		sleep 0.5
	done
	return "$(cat "$CLUSTER_DIR/node-$i.rc")"
}

# cluster_kill_node I: power node I off at once (SIGKILL to its qemu): its
# peers see a crash. Waits until the instance is recorded as ended.
cluster_kill_node() {
	local i=$1 pid n
	for ((n = 0; n < 600; n++)); do   # a node still booting has no qemu PID yet
		pid=$(cat "$CLUSTER_DIR/node-$i.pid" 2>/dev/null) && [ -n "$pid" ] && break
		cluster_node_running "$i" || return 0
		sleep 0.1
	done
	[ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null
	echo killed > "$CLUSTER_DIR/node-$i.killed.$(cat "$CLUSTER_DIR/node-$i.inst")"
	cluster_wait_node "$i" 30
	return 0
}

cluster_wait_all() { # [SECONDS]: returns 124 if some node still runs at the limit
	local i left t0=$SECONDS limit=${1:-}
	cluster_load
	while :; do
		left=0
		for ((i = 0; i < CLUSTER_NODES; i++)); do cluster_node_running $i && left=1; done
		[ $left = 0 ] && return 0
		[ -n "$limit" ] && [ $((SECONDS - t0)) -ge "$limit" ] && return 124
		sleep 0.5
	done
}

cluster_stop_all() { # kill every VM still running
	local i
	cluster_load
	for ((i = 0; i < CLUSTER_NODES; i++)); do cluster_node_running $i && cluster_kill_node $i; done
	return 0
}

# Per-node table of the latest instances; returns 0 only if every one exited 0.
cluster_table() {
	local i rc k t0 t1 ready ok=0 f
	cluster_load
	printf '%-5s %-12s %-4s %-4s %-8s %-8s %s\n' node ip inst rc wall_s ready_s note
	for ((i = 0; i < CLUSTER_NODES; i++)); do
		k=$(cat "$CLUSTER_DIR/node-$i.inst" 2>/dev/null || echo -)
		rc=$(cat "$CLUSTER_DIR/node-$i.rc" 2>/dev/null || echo -)
		{ read -r t0; read -r t1; } < "$CLUSTER_DIR/node-$i.time" 2>/dev/null || t1=""
		f=$(cluster_files "$i" "$k")
		# guest uptime when rxe0 was ready: the boot time as the VM saw it
		ready=$(sed -n 's/^rxe-vm: rxe0 ready at uptime //p' "$f.console" 2>/dev/null | tail -1)
		note=""
		case "$rc" in
		0) ;; 124) note="time limit (or killed)" ;; 125) note="VM or rxe setup failed" ;;
		-) note="no exit code" ;; *) note="command failed" ;;
		esac
		printf '%-5s %-12s %-4s %-4s %-8s %-8s %s\n' "$i" "$(cluster_ip $i)" "$k" "$rc" \
			"$( [ -n "${t1:-}" ] && awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }' || echo -)" "${ready:--}" "$note"
		[ "$rc" = 0 ] || ok=1
	done
	return $ok
}
