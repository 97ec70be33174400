#!/bin/bash
# cluster-matrix.sh - issue 29's scenario matrix on a cluster of VMs on this host
# (tools/cluster-vm: each node its own qemu VM and kernel, Soft-RoCE rxe0 on a
# virtio NIC, one Ethernet segment). One HistoryNode per VM (our DXNet, ib on
# rxe0, fabric verbs, messages and requests all to all), then HistoryCheck over
# the histories of every incarnation; one table row per run.
#
#   bench/cluster-matrix.sh [-r R] [-s NAME[,NAME...]] [-o DIR]
#   ./ibdxnet bench cluster [-r R] [-s NAME[,NAME...]] [-o DIR]
#
#   -r R     runs per scenario (default 3)
#   -s NAMES scenarios, comma-separated (default: all, in the order below)
#   -o DIR   output (default bench/results/cluster-matrix-<date>T<time>): matrix.txt
#            (everything printed), table.txt, and per run SCENARIO.RUN/ (cluster.sh's
#            node files; share/ holds the histories, the fault markers, rxe counters)
#
# Every scenario has 2 VMs, each node sending 500 msg/s (64 B) and 20 requests/s
# (deadline 5 s) to the other and lingering up to 10 s (the CI stage's
# settings). Both send over the same wall-clock span whenever their JVMs came
# up (--start-at-ms / --stop-at-ms, as bench/history-local.sh does): from
# STARTUP_S (60) s after the launch, for SEND_SECONDS (20; the mid-run faults
# MIDRUN_SECONDS, 30; crash-restart CRASH_SECONDS, 90). A JVM up later begins
# at once (the log gives each history's first send against the common start). The promise each scenario tests; every one also
# promises no duplicate, no reordering, no corruption, no phantom, no message
# delivered after its send failed, no request hung past its deadline
# (HistoryCheck fails the run on any of these, or on nothing sent):
#
#   baseline        no fault: everything delivered, every request answered.
#   loss-1          fault.sh loss 1 on both NICs: nothing lost unreported
#                   (RC retransmission hides the loss; a connection that still
#                   fails must report what it lost).
#   loss-5          fault.sh loss 5 on both NICs: the same.
#   delay-reorder   fault.sh delay 10 5 reorder 25 on both NICs: frames late
#                   and out of order on the wire, messages still in order,
#                   nothing lost unreported.
#   link-down-2s    node 1's link down for 2 s at 5 s of sending (fault.sh down
#                   2): nothing lost unreported; requests caught in it end by
#                   their deadline; traffic resumes after (column after/resume_s).
#   partition-long  node 1 drops every frame (fault.sh partition 6) at 5 s of
#                   sending, longer than the connection survives without
#                   acknowledgements (ib: qp_ack_timeout 16 x 7 tries ~ 1.9 s;
#                   HistoryNode's --idle-timeout-ms is the nio transport's and
#                   does not apply) and than the 5 s request deadline: nothing
#                   lost unreported, every pending request ends (DISCONNECTED
#                   or TIMEOUT) by its deadline, traffic resumes after.
#   crash-restart   node 1's VM killed (qemu SIGKILL, lib.sh cluster_kill_node)
#                   KILL_AFTER (8) s after its first send and started again at
#                   once (CLUSTER_INSTANCE 1 -> HistoryNode --incarnation 1);
#                   node 0 keeps running; the new incarnation sends until the
#                   shared stop time (CRASH_SECONDS of sending). Judged
#                   over all incarnations: what node 0 sent the dead node is
#                   reported lost, messages of the killed sender within the
#                   crash window are not judged, traffic flows with the new
#                   incarnation (after = messages to or from it).
#   mtu-9000        cluster.sh --mtu 9000 (RoCE path MTU 4096), no fault:
#                   everything delivered.
#
# Columns: nodes = exit codes of node 0 and node 1 (124: time limit or killed;
# crash-restart: node 1's killed instance>its restart), check = HistoryCheck's exit code, then HistoryCheck's counts: sent
# (accepted), delivered, lost-and-reported, lost-unreported, duplicated,
# reordered, corrupted, "other" (delivered after a failed send + received never
# sent), killed (lost with its killed sender + received, send unrecorded),
# requests sent / answered / failed (by reason) / hung; after = messages sent
# after the fault ended and delivered, node 0>1 / 1>0 (crash-restart: after
# the new incarnation's start, to and from it), resume_s = seconds from that
# moment to the send of the first such message, the later direction's (never:
# a direction had none; the two VMs' clocks may differ by up to a second).
#
# Environment: STARTUP_S (60), SEND_SECONDS (20), MIDRUN_SECONDS (30),
# CRASH_SECONDS (90), KILL_AFTER (8), VM_LIMIT (cluster.sh -t, 300), NODE_ARGS
# (more HistoryNode options for every run; they come last, so NODE_ARGS="--rate
# 200" overrides the rate).
# The VMs run JVMs: RXE_VM_ACCEL="tcg,thread=single" RXE_VM_MEM=2G as in CI. One
# cluster at a time; on a shared host start it under nice (nice -n 5).
# Needs build/main-classpath.txt (gradle mainClasspathFile) and target/release.
# Exit 0 only if every run's nodes exited 0 and HistoryCheck passed.

set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools/cluster-vm
ALL="baseline loss-1 loss-5 delay-reorder link-down-2s partition-long crash-restart mtu-9000"
runs=3 names="" out=""
usage() { sed -n '8,15p' "$0" >&2; exit 2; }
while getopts "r:s:o:h" opt; do
	case "$opt" in
	r) runs=$OPTARG ;;
	s) names=${OPTARG//,/ } ;;
	o) out=$OPTARG ;;
	h) sed -n '2,76p' "$0"; exit 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 0 ] || usage
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "cluster-matrix: -r must be a positive number" >&2; exit 2; }
names=${names:-$ALL}
for s in $names; do
	[[ " $ALL " == *" $s "* ]] || { echo "cluster-matrix: unknown scenario $s (one of: $ALL)" >&2; exit 2; }
done
CP_FILE=$ROOT/build/main-classpath.txt
[ -f "$CP_FILE" ] || { echo "no $CP_FILE: run 'gradle mainClasspathFile' first" >&2; exit 2; }
[ -f "$ROOT/target/release/libibdxnet.so" ] || { echo "no target/release/libibdxnet.so" >&2; exit 2; }
CP=$(cat "$CP_FILE")
out=${out:-$ROOT/bench/results/cluster-matrix-$(date +%Y-%m-%dT%H%M)}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
[ -e "$out/table.txt" ] && { echo "cluster-matrix: $out already has a table.txt" >&2; exit 2; }

SEND_SECONDS=${SEND_SECONDS:-20}
KILL_AFTER=${KILL_AFTER:-8}
STARTUP_S=${STARTUP_S:-60}
MIDRUN_SECONDS=${MIDRUN_SECONDS:-30}
CRASH_SECONDS=${CRASH_SECONDS:-90}
VM_LIMIT=${VM_LIMIT:-300}
BASE_ARGS="--rate 500 --requests-per-second 20 --deadline-ms 5000 --linger-ms 10000${NODE_ARGS:+ $NODE_ARGS}"
export RXE_VM_ACCEL=${RXE_VM_ACCEL:-tcg,thread=single} RXE_VM_MEM=${RXE_VM_MEM:-2G}

exec > >(tee -a "$out/matrix.txt") 2>&1

. "$TOOLS/lib.sh"
child=""
on_signal() {
	[ -z "$child" ] || kill -TERM "$child" 2>/dev/null
	[ -z "${CLUSTER_DIR:-}" ] || cluster_stop_all
	exit 130
}
trap on_signal INT TERM

echo "cluster-matrix: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores, $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo '+changes')"
echo "command: $0 -r $runs -s ${names// /,} -o $out"
echo "uptime at start: $(uptime)"
echo "settings: sending from launch + $STARTUP_S s for $SEND_SECONDS s (mid-run faults $MIDRUN_SECONDS s," \
	"crash-restart $CRASH_SECONDS s, node 1 killed $KILL_AFTER s after its first send), HistoryNode $BASE_ARGS;" \
	"RXE_VM_ACCEL=$RXE_VM_ACCEL RXE_VM_MEM=$RXE_VM_MEM"

# The count HistoryCheck printed for CATEGORY (exact name) in FILE.
count() { sed -n "s/^   $1  *\([0-9][0-9]*\).*/\1/p" "$2" | head -1; }

# delivered_after SENDER_FILE RECV_FILE SENDER SENDER_INCARNATION DEST T: "N FIRST": the
# messages SENDER's file says it sent DEST at or after T (epoch ms, the sender's clock)
# that RECV_FILE received, and when the earliest of them was sent ("-" if none).
delivered_after() {
	awk -F'\t' -v src="$3" -v inc="$4" -v dst="$5" -v t="$6" '
		FNR == NR { if ($1 == "send" && $3 == dst && $7 == "ok" && $2 >= t) st[$4] = $2; next }
		$1 == "recv" && $3 == src && $4 == inc && ($5 in st) { n++; if (!f || st[$5] < f) f = st[$5] }
		END { print n + 0, f ? f : "-" }' "$1" "$2"
}

# "after resume_s" for one run's share/ directory: messages sent after the fault
# ended (crash-restart: after the new incarnation started) and delivered, per
# direction (0>1/1>0); and how long after that moment the first delivered one
# was sent, the later direction's (never: a direction had none).
after_fault() { # SHARE KIND
	local share=$1 kind=$2 e a b n1 f1 n2 f2
	case "$kind" in
	plain) echo "- -"; return ;;
	crash)
		[ -f "$share/node-1.1.tsv" ] || { echo "0 no-restart"; return; }
		e=$(awk -F'\t' '$1 == "start" { print $2; exit }' "$share/node-1.1.tsv")
		a=$share/node-0.0.tsv b=$share/node-1.1.tsv
		read -r n1 f1 < <(delivered_after "$a" "$b" 0 0 1 "$e")
		read -r n2 f2 < <(delivered_after "$b" "$a" 1 1 0 "$e") ;;
	*)
		e=$(cat "$share"/*.faults 2>/dev/null | awk -F'\t' '$1 == "fault-end" { print $2; exit }')
		[ -n "$e" ] || { echo "- no-fault-end"; return; }
		a=$share/node-0.0.tsv b=$share/node-1.0.tsv
		read -r n1 f1 < <(delivered_after "$a" "$b" 0 0 1 "$e")
		read -r n2 f2 < <(delivered_after "$b" "$a" 1 0 0 "$e") ;;
	esac
	if [ "$f1" = - ] || [ "$f2" = - ]; then
		echo "$n1/$n2 never"
	else
		echo "$n1/$n2 $(awk -v a="$f1" -v b="$f2" -v e="$e" 'BEGIN { m = a > b ? a : b; printf "%.1f", (m - e) / 1000 }')"
	fi
}

FMT='%-15s %3s %-9s %5s %6s %6s %6s %6s %4s %5s %4s %5s %6s %5s %5s %5s %-26s %4s %11s %8s %s\n'
header() {
	printf "$FMT" scenario run nodes check sent deliv lost_r LOST_U dup reord corr other killed \
		req ans fail "fail_by" hung after resume_s verdict
}
header > "$out/table.txt"

# row SCENARIO RUN NODES_RC CHECK_RC CHECK_FILE SHARE KIND
row() {
	local f=$5 c by verdict a
	by=$(sed -n 's/^     by \([A-Z_a-z]*\)  *\([0-9]*\)$/\1:\2/p' "$f" | paste -sd, -)
	verdict=$(sed -n 's/^   verdict: //p' "$f" | head -1)
	a=$(after_fault "$6" "$7")
	# shellcheck disable=SC2046
	printf "$FMT" "$1" "$2" "$3" "$4" \
		"$(count 'sent (accepted)' "$f")" "$(count delivered "$f")" "$(count lost-and-reported "$f")" \
		"$(count lost-unreported "$f")" "$(count duplicated "$f")" "$(count reordered "$f")" "$(count corrupted "$f")" \
		"$(( $(count 'delivered though its send failed' "$f") + $(count 'received, never sent' "$f") ))" \
		"$(( $(count 'lost with its killed sender' "$f") + $(count 'received, send unrecorded (sender killed)' "$f") ))" \
		"$(count 'requests sent' "$f")" "$(count 'requests answered' "$f")" "$(count 'requests failed' "$f")" \
		"${by:--}" "$(count 'requests hung past deadline' "$f")" $a "${verdict:-no verdict}"
}

fail=0
for scenario in $names; do
	mtu=1500 kind=plain secs=$SEND_SECONDS
	declare -a env=()
	case "$scenario" in
	baseline) ;;
	loss-1) env=(-e HISTORY_FAULT="loss 1") ;;
	loss-5) env=(-e HISTORY_FAULT="loss 5") ;;
	delay-reorder) env=(-e HISTORY_FAULT="delay 10 5 reorder 25") ;;
	link-down-2s) kind=midrun secs=$MIDRUN_SECONDS; env=(-e HISTORY_FAULT_AT="5 down 2" -e HISTORY_FAULT_AT_NODES=1) ;;
	partition-long) kind=midrun secs=$MIDRUN_SECONDS; env=(-e HISTORY_FAULT_AT="5 partition 6" -e HISTORY_FAULT_AT_NODES=1) ;;
	crash-restart) kind=crash secs=$CRASH_SECONDS ;;
	mtu-9000) mtu=9000 ;;
	esac
	for ((run = 1; run <= runs; run++)); do
		dir=$out/$scenario.$run
		echo
		echo "-- $scenario run $run ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)): $dir"
		t0=$SECONDS
		start_at=$(( $(date +%s%3N) + STARTUP_S * 1000 ))
		args="$BASE_ARGS --start-at-ms $start_at --stop-at-ms $((start_at + secs * 1000))"
		if [ "$kind" != crash ]; then
			echo "   cluster.sh -n 2 -t $VM_LIMIT --mtu $mtu${env[*]:+ ${env[*]}} -e HISTORY_ARGS=\"$args\" -- history-node.sh ib $secs"
			"$TOOLS/cluster.sh" -n 2 -t "$VM_LIMIT" -o "$dir" --mtu "$mtu" ${env[@]+"${env[@]}"} \
				-e HISTORY_ARGS="$args" -- "$TOOLS/history-node.sh" ib "$secs" 2>&1 &
			child=$!
			wait "$child"
			child=""
			nodes="$(cat "$dir/node-0.rc" 2>/dev/null || echo -),$(cat "$dir/node-1.rc" 2>/dev/null || echo -)"
		else
			echo "   lib.sh: both nodes with HISTORY_ARGS=\"$args\"; node 1 killed $KILL_AFTER s after its first send, started again"
			cluster_init "$dir" 2 1500 "$VM_LIMIT" -e HISTORY_ARGS="$args" -- "$TOOLS/history-node.sh" ib "$secs" || exit 2
			cluster_start_node 0
			cluster_start_node 1
			for ((i = 0; i < 2400; i++)); do
				grep -q '^send	' "$dir/share/node-1.0.tsv" 2>/dev/null && break
				cluster_node_running 1 || break
				sleep 0.1
			done
			echo "   node 1 sends ($((SECONDS - t0)) s after the boot)"
			sleep "$KILL_AFTER"
			cluster_kill_node 1
			rc10=$(cat "$dir/node-1.rc" 2>/dev/null || echo -)
			echo "   node 1 killed at $(date -u +%H:%M:%S) ($((SECONDS - t0)) s; instance 0 rc $rc10), starting it again"
			cluster_start_node 1
			cluster_wait_all $((VM_LIMIT + ${RXE_VM_BOOT_SLACK:-90} + 30)) ||
				echo "   still running after $((SECONDS - t0)) s, killing what is left"
			cluster_stop_all
			cluster_table
			# node 0's code, node 1's killed instance > its restart
			nodes="$(cat "$dir/node-0.rc" 2>/dev/null || echo -),$rc10>$(cat "$dir/node-1.rc" 2>/dev/null || echo -)"
		fi
		echo "   cluster ended after $((SECONDS - t0)) s, node exit codes $nodes"
		# When each history began to send and first received, against the common start.
		for f in "$dir"/share/node-*.tsv; do
			[ -f "$f" ] && awk -F'\t' -v s="$start_at" -v n="${f##*/}" '
				$1 == "send" && !fs { fs = $2 } $1 == "recv" && !fr { fr = $2 }
				END { printf "   %s: first send %s, first receive %s (s after the common start)\n", n,
					fs ? sprintf("%+.1f", (fs - s) / 1000) : "none", fr ? sprintf("%+.1f", (fr - s) / 1000) : "none" }' "$f"
		done
		for f in "$dir"/share/*.faults; do
			[ -f "$f" ] && sed "s|^|   ${f##*/}: |" "$f"
		done
		java -cp "$CP" io.ibdxnet.app.cluster.HistoryCheck --scenario "$scenario.$run" "$dir/share" > "$dir/check.txt" 2>&1
		crc=$?
		cat "$dir/check.txt"
		# A pass: HistoryCheck passed and every node exited 0 (crash-restart: the
		# killed instance aside).
		case "$crc:$kind:$nodes" in 0:plain:0,0 | 0:midrun:0,0 | 0:crash:0,*\>0) ;; *) fail=1 ;; esac
		r=$(row "$scenario" "$run" "$nodes" "$crc" "$dir/check.txt" "$dir/share" "$kind")
		echo "$r" >> "$out/table.txt"
		header
		echo "$r"
	done
done

echo
echo "== cluster-matrix table ($out/table.txt)"
cat "$out/table.txt"
echo "uptime at the end: $(uptime)"
pgrep qemu >/dev/null && echo "cluster-matrix: note: qemu processes on this host now: $(pgrep -a qemu | cut -c1-100)"
echo "cluster-matrix: exit $fail"
exit $fail
