#!/bin/bash
# Upstream DXNet's DXNetMain (unchanged), two JVMs on this host, over our library
# on the fabric that spans the processes of one host (simhost: no RDMA device
# needed) and over upstream's own NIO, interleaved, ROUNDS times; our own DXNet
# (DemoMain --role) over ib/simhost and nio beside them. Upstream's default
# configuration: only the node addresses, the device and (for ib) the receive
# pool (256 MB instead of 2 GB) are set; its request timeout stays 100 ms.
#
#   gradle upstreamClasspathFile mainClasspathFile cargoBuild
#   compat/upstream/dxnetmain-host.sh [COUNT [REQUESTS [SIZE]]]     (ROUNDS=3)
#
# Node 0 (the sender, upstream's login coordinator) starts first; node 1 once node 0
# waits for it: a LoginRequest that reaches node 0 before it registered its message
# types breaks node 0's incoming stream for good (upstream Java, any transport that
# connects that early). Prints one RESULT line per run and exits 0 when every run
# completed (upstream's with every message sent and received and both JVMs ended,
# its ReqRespTimeouts counted in the RESULT line; ours with 0 dropped).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COUNT=${1:-200000}
REQUESTS=${2:-20000}
SIZE=${3:-64}
ROUNDS=${ROUNDS:-3}
PAIR_TIMEOUT=${PAIR_TIMEOUT:-300}
UCP=$(cat "$ROOT/build/upstream-classpath.txt") || { echo "run: gradle upstreamClasspathFile" >&2; exit 2; }
MCP=$(cat "$ROOT/build/main-classpath.txt") || { echo "run: gradle mainClasspathFile" >&2; exit 2; }
work=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "# work directory: $work" || trap 'rm -rf "$work"' EXIT
mkdir "$work/jni"
cp "$ROOT/target/release/libibdxnet.so" "$work/jni/"
for dev in ib nio; do
	[ $dev = ib ] && device=Infiniband pool=', "m_ibConfig": {"m_incomingBufferPoolTotalSize": {"m_value": 268435456, "m_unit": "b"}}' ||
		device=Ethernet pool=
	cat > "$work/$dev.json" <<JSON
{"m_jniPath": "jni",
 "m_nodesConfig": [{"m_nodeId": 0, "m_address": {"m_ip": "127.0.0.1", "m_port": 22221}},
                   {"m_nodeId": 1, "m_address": {"m_ip": "127.0.0.2", "m_port": 22222}}],
 "m_coreConfig": {"m_device": "$device"}$pool}
JSON
done
cd "$work" || exit 2
export IBDXNET_FABRIC=simhost IBDXNET_SIMHOST_DIR="$work/simhost" RUST_LOG=${RUST_LOG:-warn}
J=(java --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
	"-Dlog4j.configurationFile=file:$ROOT/compat/upstream/log4j2.xml" -cp "$UCP" de.hhu.bsinfo.dxnet.DXNetMain)

# Upstream DXNetMain cannot recover from its own first LoginRequest timing out
# (100 ms, e.g. on a loaded host): its retry loop re-sends the same request object,
# and DXNet.sendSync registers it under its old message id while writeMessage sends
# it under a new one, so the retry is never answered (an endless login loop) or is
# answered by a stale response and leaves a request in the map for good (the
# receiver waits for an empty request map forever). Any transport, NIO included;
# see docs/upstream-dxnet.md. Such an attempt is stopped at once and run again.
LOGIN_TIMEOUT="waiting for responses to LoginRequest.*failed, timeout"
ATTEMPTS=${ATTEMPTS:-3}

# upstream DEV WORKLOAD N NAME: one pair (ATTEMPTS times at most while upstream's
# login times out); prints a RESULT line; 1 if incomplete.
upstream() {
	local dev=$1 w=$2 n=$3 name=$4 attempt
	for attempt in $(seq "$ATTEMPTS"); do
		upstream_pair "$@" && return 0
		[ "$PAIR_STATUS" = login-timeout ] || return 1
		echo "RETRY impl=upstream-$dev run=$name attempt=$attempt: node 1's first LoginRequest timed out (upstream's 100 ms); upstream's login retry cannot succeed, so the pair was stopped and starts again"
	done
	return 1
}

# upstream_pair DEV WORKLOAD N NAME: sets PAIR_STATUS to ok, login-timeout or failed.
upstream_pair() {
	local dev=$1 w=$2 n=$3 name=$4 s r i
	PAIR_STATUS=failed
	IBDXNET_COMPAT_LISTEN=127.0.0.1 timeout "$PAIR_TIMEOUT" "${J[@]}" "$dev.json" 5000 "$w" "$n" 0 "$SIZE" 1 0 1 > "s-$name.log" 2>&1 &
	local sender=$!
	for i in $(seq 300); do grep -q "waiting for 1 nodes" "s-$name.log" && break; sleep 0.1; done
	IBDXNET_COMPAT_LISTEN=127.0.0.2 timeout "$PAIR_TIMEOUT" "${J[@]}" "$dev.json" 5000 "$w" 0 "$n" "$SIZE" 1 1 > "r-$name.log" 2>&1 &
	local receiver=$!
	while kill -0 $receiver 2>/dev/null; do
		if grep -q "$LOGIN_TIMEOUT" "r-$name.log" 2>/dev/null; then
			kill $sender $receiver 2>/dev/null # timeout passes the TERM on to its java
			wait $sender $receiver
			PAIR_STATUS=login-timeout
			return 1
		fi
		sleep 0.2
	done
	wait $receiver
	r=$?
	wait $sender
	s=$?
	local send recv lat timeouts
	send=$(grep -o "RESULTS SEND: [^]]*" "s-$name.log" | head -1)
	recv=$(grep -o "RESULTS RECV: [^]]*" "r-$name.log" | head -1)
	lat=$(grep -o "RESULTS LATENCY: [^]]*" "s-$name.log" | head -1)
	timeouts=$(cat "s-$name.log" "r-$name.log" | grep -o "ReqRespTimeouts=[0-9]*" | awk -F= '{t += $2} END {print t + 0}')
	echo "RESULT impl=upstream-$dev run=$name exit=$s/$r timeouts=$timeouts | $send | $recv | $lat"
	if grep -q "RESULTS SEND: .*Msgs=$n," "s-$name.log" && grep -q "RESULTS RECV: .*Msgs=$n," "r-$name.log" &&
		[ $s = 0 ] && [ $r = 0 ]; then
		PAIR_STATUS=ok
		# A request past upstream's 100 ms is a latency figure, not a failure:
		# on a loaded two-core host any transport misses it now and then.
		[ "$timeouts" = 0 ] || grep -h "ReqRespTimeouts=[1-9]" "s-$name.log" "r-$name.log" | grep RESULTS
		return 0
	fi
	grep -hE "ERROR|Exception|WARN" "s-$name.log" "r-$name.log" | head -10
	return 1
}

# ours TRANSPORT: our DemoMain, receiver and sender processes; prints a RESULT line.
ours() {
	local t=$1 base=$((24000 + RANDOM % 20000))
	local D=(java -cp "$MCP" -Djava.library.path="$ROOT/target/release" io.ibdxnet.app.DemoMain --transport "$t"
		--fabric simhost --messages "$COUNT" --size "$SIZE" --requests "$REQUESTS" --threads 1
		--node0 127.0.0.1:$base --node1 127.0.0.1:$((base + 1)))
	timeout "$PAIR_TIMEOUT" "${D[@]}" --role receiver > "ours-r-$t.log" 2>&1 &
	local receiver=$!
	sleep 1
	timeout "$PAIR_TIMEOUT" "${D[@]}" --role sender > "ours-s-$t.log" 2>&1
	local s=$?
	wait $receiver
	local r=$?
	echo "RESULT impl=ours-$t exit=$s/$r | $(grep -E "^messages:" "ours-s-$t.log") | $(grep -E "^request/response:" "ours-s-$t.log") | $(grep -E "^dropped" "ours-s-$t.log")"
	[ $s = 0 ] && [ $r = 0 ] && grep -q "^dropped messages: 0" "ours-s-$t.log" && return 0
	tail -20 "ours-s-$t.log" "ours-r-$t.log"
	return 1
}

# RUNS: which of them (default all), e.g. RUNS="upstream-ib-requests ours-ib".
RUNS=${RUNS:-upstream-ib-messages upstream-ib-requests upstream-nio-messages upstream-nio-requests ours-ib ours-nio}
rc=0
for round in $(seq "$ROUNDS"); do
	echo "# round $round ($(uptime | sed 's/.*load/load/'))"
	for run in $RUNS; do
		case $run in
		upstream-*-messages) dev=${run#upstream-}; dev=${dev%-messages}; upstream "$dev" 1 "$COUNT" "$dev-messages-$round" || rc=1 ;;
		upstream-*-requests) dev=${run#upstream-}; dev=${dev%-requests}; upstream "$dev" 3 "$REQUESTS" "$dev-requests-$round" || rc=1 ;;
		ours-*) ours "${run#ours-}" || rc=1 ;;
		*) echo "unknown run $run" >&2; exit 2 ;;
		esac
	done
done
exit $rc
