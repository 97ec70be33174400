#!/bin/bash
# The cluster history check (issue 29) on this host, without VMs: 3 HistoryNode
# processes on 127.0.0.1, all to all (messages and requests), then HistoryCheck
# over their histories, one table per scenario.
#
#   bench/history-local.sh [SCENARIO...]     (default: nio-kill-restart ib-simhost-kill-restart)
#
# A scenario is TRANSPORT-KIND[-table-at-start]:
#   TRANSPORT  nio, or ib-simhost (transport ib on the simhost fabric, which spans
#              the processes of one host; a private IBDXNET_SIMHOST_DIR per run)
#   KIND       steady (nobody dies), pause (node 1 gets SIGSTOP after KILL_AFTER s
#              of sending and SIGCONT PAUSE_FOR s later), or kill-restart (node 1 gets SIGKILL after
#              KILL_AFTER s of sending, a new process with the same id and
#              address starts DOWN_FOR s later and sends until the others stop)
#   -table-at-start  peers in the start configuration (the documented way)
#              instead of added after the start; either way HistoryNode
#              registers its receivers in start's beforeReceiving (before
#              DXNet.start(config, beforeReceiving) existed, this scenario
#              showed the messages a restarted node dropped unreported)
# Settings (environment): SECONDS_TO_SEND (12, whole seconds), STARTUP_MS (4000:
# the JVMs come up, then all send from the same moment to the same moment),
# RATE per peer (2000 msg/s), RPS requests per peer (50/s), SIZE (64 B),
# DEADLINE_MS (2000), KILL_AFTER (4 s of sending),
# DOWN_FOR (1.5), PAUSE_FOR (3), PORT_BASE (23400), OUT (histories; default a temp dir, kept),
# NODE_ARGS (more HistoryNode options for every node, e.g. "--handler-us 1000 --size 1024":
# a slow application whose killed node had a handler backlog).
# Exit code: HistoryCheck's (0 only if every scenario passes).
# Needs build/main-classpath.txt (gradle mainClasspathFile) and target/release.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
CP_FILE=$ROOT/build/main-classpath.txt
[ -f "$CP_FILE" ] || { echo "no $CP_FILE: run 'gradle mainClasspathFile' first" >&2; exit 2; }
CP=$(cat "$CP_FILE")
LIB=$ROOT/target/release
SECONDS_TO_SEND=${SECONDS_TO_SEND:-12}
STARTUP_MS=${STARTUP_MS:-4000}
RATE=${RATE:-2000}
RPS=${RPS:-50}
SIZE=${SIZE:-64}
DEADLINE_MS=${DEADLINE_MS:-2000}
KILL_AFTER=${KILL_AFTER:-4}
DOWN_FOR=${DOWN_FOR:-1.5}
PAUSE_FOR=${PAUSE_FOR:-3}
PORT_BASE=${PORT_BASE:-23400}
OUT=${OUT:-$(mktemp -d /tmp/history-local.XXXXXX)}
[ $# -gt 0 ] || set -- nio-kill-restart ib-simhost-kill-restart

echo "history-local: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores"
echo "uptime at start: $(uptime)"
echo "settings: ${SECONDS_TO_SEND} s, $RATE msg/s and $RPS req/s per peer, $SIZE B, deadline $DEADLINE_MS ms," \
	"kill after $KILL_AFTER s, down for $DOWN_FOR s${NODE_ARGS:+, node options $NODE_ARGS}; histories in $OUT"

now_ms() { date +%s%3N; }

# node ID INCARNATION: starts one HistoryNode in the background; $! is its pid. All
# nodes of a scenario send from START_AT to STOP_AT (wall clock), whenever their JVM came up.
node() {
	java -Xmx192m -cp "$CP" -Djava.library.path="$LIB" io.ibdxnet.app.cluster.HistoryNode \
		--node "$1" --nodes "$NODES" --transport "$TRANSPORT" --fabric "$FABRIC" \
		--start-at-ms "$START_AT" --stop-at-ms "$STOP_AT" \
		--rate "$RATE" --requests-per-second "$RPS" --size "$SIZE" --deadline-ms "$DEADLINE_MS" \
		--linger-ms 2000 --table-at-start "$TABLE_AT_START" ${NODE_ARGS:-} \
		--history "$DIR/node-$1.$2.tsv" >"$DIR/node-$1.$2.log" 2>&1 &
}

CHECK_ARGS=()
n=0
for scenario in "$@"; do
	case "$scenario" in
	nio-*) TRANSPORT=nio FABRIC=auto ;;
	ib-simhost-*) TRANSPORT=ib FABRIC=simhost ;;
	*) echo "unknown scenario $scenario" >&2; exit 2 ;;
	esac
	case "$scenario" in *-table-at-start) TABLE_AT_START=true ;; *) TABLE_AT_START=false ;; esac
	DIR=$OUT/$scenario
	mkdir -p "$DIR"
	export IBDXNET_SIMHOST_DIR=$DIR/simhost
	p=$((PORT_BASE + 10 * n))
	n=$((n + 1))
	NODES=127.0.0.1:$p,127.0.0.1:$((p + 1)),127.0.0.1:$((p + 2))
	echo "-- $scenario: $TRANSPORT (fabric $FABRIC) on $NODES"
	START_AT=$(($(now_ms) + STARTUP_MS))
	STOP_AT=$((START_AT + SECONDS_TO_SEND * 1000))
	since() { awk "BEGIN{printf \"%.1f\", ($(now_ms) - $START_AT) / 1000}"; }
	node 0 0; p0=$!
	node 1 0; p1=$!
	node 2 0; p2=$!
	pids="$p0 $p2"
	case "$scenario" in
	*kill-restart*)
		sleep "$(awk "BEGIN{print ($START_AT - $(now_ms)) / 1000 + $KILL_AFTER}")"
		kill -KILL "$p1"
		wait "$p1" 2>/dev/null
		echo "   node 1 killed (SIGKILL) at $(since) s of sending"
		sleep "$DOWN_FOR"
		node 1 1; pids="$pids $!"
		echo "   node 1 restarted at $(since) s, sends until the others stop"
		;;
	*pause*)
		# SIGSTOP: a paused process (a long GC, a VM stalled); with PAUSE_FOR beyond the
		# peers' idle timeout (NODE_ARGS="--idle-timeout-ms 1000" on nio) they give it up.
		sleep "$(awk "BEGIN{print ($START_AT - $(now_ms)) / 1000 + $KILL_AFTER}")"
		kill -STOP "$p1"
		echo "   node 1 stopped (SIGSTOP) at $(since) s of sending"
		sleep "$PAUSE_FOR"
		kill -CONT "$p1"
		echo "   node 1 continued (SIGCONT) at $(since) s"
		pids="$pids $p1"
		;;
	*) pids="$pids $p1" ;;
	esac
	for pid in $pids; do
		wait "$pid" || echo "   a node exited with $? (see $DIR/*.log)"
	done
	CHECK_ARGS+=(--scenario "$scenario" "$DIR")
done

echo "-- HistoryCheck ${CHECK_ARGS[*]}"
java -cp "$CP" io.ibdxnet.app.cluster.HistoryCheck "${CHECK_ARGS[@]}"
rc=$?
echo "history-local: HistoryCheck exit $rc; uptime at the end: $(uptime)"
exit $rc
