#!/bin/bash
# A message after its sender idled, to our node 0's handler (ib on sim, one JVM):
# upstream DXNet's real MsgrcJNIBinding as the sender (compat path) in its three
# idle modes, and our own DXNet node as the sender beside it; each row: latency
# percentiles per gap and the idle send thread's CPU (UpstreamIdleLatency).
#   bench/upstream-idle.sh [SAMPLES [GAPS_MS...]]      (default: 40 10 100 1000)
# BASE_LIB=DIR adds a row with the library in DIR (e.g. an older build) first.
# Needs: gradle compatClasspathFile cargoBuild
cd "$(dirname "$0")/.."
args=("${@:-40}"); [ $# -le 1 ] && args=("${1:-40}" 10 100 1000)
CP=$(cat build/compat-classpath.txt)
run() { # LIBDIR LABEL [ENV...] -- [JAVA OPTIONS...]
	local lib=$1 label=$2; shift 2
	local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
	echo "== $label ($(uptime | sed 's/.*load/load/'))"
	env "${envs[@]}" timeout 600 java -cp "$CP" -Djava.library.path="$lib" "$@" io.ibdxnet.compat.UpstreamIdleLatency "${args[@]}" 2>&1 |
		grep -E "^(sender|gap_ms|idle_send)|Exception|rror"
}
[ -n "$BASE_LIB" ] && run "$BASE_LIB" "upstream sender, library in $BASE_LIB" --
run target/release "upstream sender, ring watch (default)" --
run target/release "upstream sender, polling (ring watch off)" IBDXNET_COMPAT_RING_WATCH=0 --
run target/release "upstream sender, every engine thread polling" -- -Dcompat.keys=parking_sleep_after_us=never -Dkeys=parking_sleep_after_us=never
run target/release "our own sender (doorbell)" -- -Dsender=ours
