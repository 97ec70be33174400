#!/bin/bash
# cluster-matrix.sh - issue 29's scenario matrix on a cluster of VMs on this host
# (tools/cluster-vm: each node its own qemu VM and kernel, Soft-RoCE rxe0 on a
# virtio NIC, one Ethernet segment). One HistoryNode per VM (our DXNet, ib on
# rxe0, fabric verbs, messages and requests all to all), then HistoryCheck over
# the histories of every incarnation; one table row per run.
#
#   bench/cluster-matrix.sh [-n N] [-r R] [-s NAME[,NAME...]] [-o DIR]
#   ./ibdxnet bench cluster [-n N] [-r R] [-s NAME[,NAME...]] [-o DIR]
#
#   -n N     VMs per run, 2..4 (default 2; key-one-side takes 2 only)
#   -r R     runs per scenario (default 3)
#   -s NAMES scenarios, comma-separated (default: all, in the order below)
#   -o DIR   output (default bench/results/cluster-matrix-<date>T<time>): matrix.txt
#            (everything printed), table.txt, and per run SCENARIO.RUN/ (SCENARIO-nN.RUN/
#            with N > 2: cluster.sh's node files; share/ holds the histories, the fault
#            markers, rxe counters)
#
# With 2 VMs each node sends 500 msg/s (64 B) and 20 requests/s (deadline 5 s)
# to the other and lingers up to 10 s (the CI stage's settings). With N > 2
# every node sends to every other, and the per-peer rates are lowered so that
# the cluster as a whole sends what 2 VMs send (1 000 msg/s, 40 requests/s:
# 166 and 7 per peer with 3 VMs, 83 and 3 with 4; printed in the settings
# line): all VMs share the host's cores under TCG, and a run is judged on
# correctness, not on a starved VM. All send over the same wall-clock span whenever their JVMs came
# up (--start-at-ms / --stop-at-ms, as bench/history-local.sh does): from
# STARTUP_S (60; 90 with 3 VMs, 120 with 4) s after the launch, for SEND_SECONDS (20; the mid-run faults
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
#   partition-short node 1 drops every frame for PARTITION_SHORT_S (0.5) s
#                   (fault.sh partition) at 5 s of sending, well inside what a
#                   queue pair is meant to survive without acknowledgements
#                   (qp_ack_timeout 16 x 7 tries ~ 1.9 s): nothing lost
#                   unreported, traffic resumes; nothing lost at all is the
#                   aim, but under TCG acknowledgements are late already and
#                   the default budget broke the connection in some runs
#                   (RELIABILITY.md, Known limits): the lost column says.
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
# baseline, loss-1, loss-5 and mtu-9000 promise more: every
# accepted message delivered (sent = deliv, lost_r 0); a run that lost any,
# even reported, fails ("FAIL (N lost, promised none)").
#   key-mismatch    a different pre-shared key on every VM (IBDXNET_AUTH_KEY,
#                   history-node.sh's HISTORY_AUTH_KEYS; random keys of 32
#                   bytes made per run, never printed): the nodes never
#                   exchange data — no message received, no request handled
#                   or answered (HistoryCheck --refused, and the column
#                   crossed: the histories' recv and reqhandled lines counted
#                   apart, must be 0); every send fails with its reason or its
#                   loss is reported, every request fails by its deadline; and
#                   each node's engine counted the other's control packets as
#                   dropped_unauthenticated (column unauth, from the stats
#                   line each HistoryNode writes at its end; each must be > 0).
#   key-one-side    a key on node 0, none on node 1: the same promise.
#
# Columns: nodes = exit codes of node 0, 1, ... (124: time limit or killed;
# crash-restart: node 1's killed instance>its restart), check = HistoryCheck's exit code, then HistoryCheck's counts: sent
# (accepted), sfail (sends that threw), delivered, lost-and-reported, lost-unreported, duplicated,
# reordered, corrupted, "other" (delivered after a failed send + received never
# sent), killed (lost with its killed sender + received, send unrecorded),
# requests sent / answered / failed (by reason) / hung; after = messages sent
# after the fault ended and delivered, node 0>1 / 1>0 (crash-restart: after
# the new incarnation's start, to and from it), resume_s = seconds from that
# moment to the send of the first such message, the later direction's (never:
# a direction had none; the two VMs' clocks may differ by up to a second;
# with N > 2 these two columns are about nodes 0 and 1 only); crossed =
# recv + reqhandled lines in all histories (key scenarios; - otherwise);
# unauth = each node's dropped_unauthenticated at its end (key scenarios).
#
# Environment: STARTUP_S (60 + 30 per VM beyond 2), SEND_SECONDS (20), MIDRUN_SECONDS (30),
# CRASH_SECONDS (90), PARTITION_SHORT_S (0.5), KILL_AFTER (8), VM_LIMIT (cluster.sh -t, 300 + 60 per VM beyond 2), NODE_ARGS
# (more HistoryNode options for every run; they come last, so NODE_ARGS="--rate
# 200" overrides the rate).
# The VMs run JVMs: RXE_VM_ACCEL="tcg,thread=single" RXE_VM_MEM=2G as in CI. One
# cluster at a time; on a shared host start it under nice (nice -n 5).
# Needs build/main-classpath.txt (gradle mainClasspathFile) and target/release.
# Exit 0 only if every run's nodes exited 0 and HistoryCheck passed (key
# scenarios: with --refused, crossed 0 and every node's unauth > 0).

set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools/cluster-vm
ALL="baseline loss-1 loss-5 delay-reorder partition-short link-down-2s partition-long crash-restart mtu-9000 key-mismatch key-one-side"
n=2 runs=3 names="" out=""
usage() { sed -n '8,17p' "$0" >&2; exit 2; }
while getopts "n:r:s:o:h" opt; do
	case "$opt" in
	n) n=$OPTARG ;;
	r) runs=$OPTARG ;;
	s) names=${OPTARG//,/ } ;;
	o) out=$OPTARG ;;
	h) sed -n '2,98p' "$0"; exit 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 0 ] || usage
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "cluster-matrix: -r must be a positive number" >&2; exit 2; }
[[ "$n" =~ ^[2-4]$ ]] || { echo "cluster-matrix: -n must be 2..4" >&2; exit 2; }
names=${names:-$ALL}
for s in $names; do
	[[ " $ALL " == *" $s "* ]] || { echo "cluster-matrix: unknown scenario $s (one of: $ALL)" >&2; exit 2; }
	[ "$s" != key-one-side ] || [ "$n" = 2 ] || { echo "cluster-matrix: key-one-side takes 2 VMs (-n 2)" >&2; exit 2; }
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
STARTUP_S=${STARTUP_S:-$((60 + 30 * (n - 2)))}
MIDRUN_SECONDS=${MIDRUN_SECONDS:-30}
CRASH_SECONDS=${CRASH_SECONDS:-90}
VM_LIMIT=${VM_LIMIT:-$((300 + 60 * (n - 2)))}
# Per peer: the cluster as a whole sends 1000 msg/s and 40 requests/s, as 2 VMs do.
pairs=$((n * (n - 1)))
rate=$((1000 / pairs)) reqs=$(((40 + pairs / 2) / pairs))
BASE_ARGS="--rate $rate --requests-per-second $reqs --deadline-ms 5000 --linger-ms 10000${NODE_ARGS:+ $NODE_ARGS}"
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
echo "command: $0 -n $n -r $runs -s ${names// /,} -o $out"
echo "uptime at start: $(uptime)"
echo "settings: sending from launch + $STARTUP_S s for $SEND_SECONDS s (mid-run faults $MIDRUN_SECONDS s," \
	"crash-restart $CRASH_SECONDS s, node 1 killed $KILL_AFTER s after its first send), HistoryNode $BASE_ARGS;" \
	"RXE_VM_ACCEL=$RXE_VM_ACCEL RXE_VM_MEM=$RXE_VM_MEM"
[ "$n" = 2 ] || echo "settings: $n VMs, all to all: per-peer rates lowered from 500 msg/s and 20 requests/s to" \
	"$rate and $reqs, so that the cluster sends what 2 VMs send (the VMs share the host's $(nproc) cores under TCG)"
# NODE_ARGS may set the rates again (its options come last and win): say which hold.
read -r rate_now reqs_now < <(awk '{ for (i = 1; i < NF; i++) { if ($i == "--rate") r = $(i + 1)
	if ($i == "--requests-per-second") q = $(i + 1) } } END { print r, q }' <<< "$BASE_ARGS")
[ "$rate_now $reqs_now" = "$rate $reqs" ] ||
	echo "settings: NODE_ARGS sets the per-peer rates: $rate_now msg/s and $reqs_now requests/s hold"

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
	plain|key) echo "- -"; return ;;
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

FMT='%-17s %3s %-11s %5s %6s %5s %6s %6s %6s %4s %5s %4s %5s %6s %5s %5s %5s %-26s %4s %11s %8s %7s %-11s %s\n'
header() {
	printf "$FMT" scenario run nodes check sent sfail deliv lost_r LOST_U dup reord corr other killed \
		req ans fail "fail_by" hung after resume_s crossed unauth verdict
}
header > "$out/table.txt"

# The key scenarios' own figures for one run's share/ directory: "CROSSED UNAUTH":
# recv and reqhandled lines in all histories (data that crossed the refusal),
# and each node's dropped_unauthenticated from its history's stats line (-: no
# stats line, the node did not end the orderly way), joined by /.
key_figures() { # SHARE
	local share=$1 i crossed u="" v
	crossed=$(cat "$share"/node-*.tsv 2>/dev/null | awk -F'\t' '$1 == "recv" || $1 == "reqhandled"' | wc -l)
	for ((i = 0; i < n; i++)); do
		v=$(stat_of "$share/node-$i.0.tsv" dropped_unauthenticated)
		u+="${u:+/}${v:--}"
	done
	echo "$crossed $u"
}

# stat_of HISTORY KEY: KEY's value in the history's stats line (empty: none).
stat_of() {
	awk -F'\t' -v k="$2" '$1 == "stats" { n = split($3, kv, " "); for (i = 1; i <= n; i++) {
		split(kv[i], p, "="); if (p[1] == k) v = p[2] } } END { print v }' "$1" 2>/dev/null
}

# row SCENARIO RUN NODES_RC CHECK_RC CHECK_FILE SHARE KIND [NONE_LOST]
# (NONE_LOST: the scenario promises every accepted message delivered)
row() {
	local f=$5 c by verdict a k="- -" lost
	by=$(sed -n 's/^     by \([A-Z_a-z]*\)  *\([0-9]*\)$/\1:\2/p' "$f" | paste -sd, -)
	verdict=$(sed -n 's/^   verdict: //p' "$f" | head -1)
	lost=$(count 'sent (accepted)' "$f") c=$(count delivered "$f")
	lost=$(( ${lost:-0} - ${c:-0} ))
	[ -z "${8:-}" ] || [ "$lost" = 0 ] || verdict="FAIL ($lost lost, promised none)"
	a=$(after_fault "$6" "$7")
	[ "$7" != key ] || k=$(key_figures "$6")
	# shellcheck disable=SC2046,SC2086
	printf "$FMT" "$1" "$2" "$3" "$4" \
		"$(count 'sent (accepted)' "$f")" "$(count 'send failed (told at once)' "$f")" "$(count delivered "$f")" "$(count lost-and-reported "$f")" \
		"$(count lost-unreported "$f")" "$(count duplicated "$f")" "$(count reordered "$f")" "$(count corrupted "$f")" \
		"$(( $(count 'delivered though its send failed' "$f") + $(count 'received, never sent' "$f") ))" \
		"$(( $(count 'lost with its killed sender' "$f") + $(count 'received, send unrecorded (sender killed)' "$f") ))" \
		"$(count 'requests sent' "$f")" "$(count 'requests answered' "$f")" "$(count 'requests failed' "$f")" \
		"${by:--}" "$(count 'requests hung past deadline' "$f")" $a $k "${verdict:-no verdict}"
}

# A pre-shared key for one node of one run: 24 random bytes in base64 (32 bytes).
new_key() { head -c 24 /dev/urandom | base64; }

fail=0
for scenario in $names; do
	mtu=1500 kind=plain secs=$SEND_SECONDS keys="" none_lost=""
	declare -a env=()
	case "$scenario" in
	baseline) none_lost=1 ;;
	loss-1) none_lost=1 env=(-e HISTORY_FAULT="loss 1") ;;
	loss-5) none_lost=1 env=(-e HISTORY_FAULT="loss 5") ;;
	delay-reorder) env=(-e HISTORY_FAULT="delay 10 5 reorder 25") ;;
	partition-short) kind=midrun secs=$MIDRUN_SECONDS
		env=(-e HISTORY_FAULT_AT="5 partition ${PARTITION_SHORT_S:-0.5}" -e HISTORY_FAULT_AT_NODES=1) ;;
	link-down-2s) kind=midrun secs=$MIDRUN_SECONDS; env=(-e HISTORY_FAULT_AT="5 down 2" -e HISTORY_FAULT_AT_NODES=1) ;;
	partition-long) kind=midrun secs=$MIDRUN_SECONDS; env=(-e HISTORY_FAULT_AT="5 partition 6" -e HISTORY_FAULT_AT_NODES=1) ;;
	crash-restart) kind=crash secs=$CRASH_SECONDS ;;
	mtu-9000) mtu=9000 none_lost=1 ;;
	key-mismatch) kind=key keys=each ;;
	key-one-side) kind=key keys=node0 ;;
	esac
	label=$scenario
	[ "$n" = 2 ] || label=$scenario-n$n
	for ((run = 1; run <= runs; run++)); do
		dir=$out/$label.$run
		echo
		echo "-- $label run $run ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)): $dir"
		t0=$SECONDS
		start_at=$(( $(date +%s%3N) + STARTUP_S * 1000 ))
		args="$BASE_ARGS --start-at-ms $start_at --stop-at-ms $((start_at + secs * 1000))"
		shown=${env[*]:+ ${env[*]}}
		if [ -n "$keys" ]; then
			# New keys every run; the log names them, never shows them.
			k=""
			for ((i = 0; i < n; i++)); do
				if [ "$keys" = each ] || [ "$i" = 0 ]; then k+="${k:+ }$(new_key)"; else k+="${k:+ }-"; fi
			done
			env=(-e HISTORY_AUTH_KEYS="$k")
			shown=" -e HISTORY_AUTH_KEYS=\"$(for ((i = 0; i < n; i++)); do
				if [ "$keys" = each ] || [ "$i" = 0 ]; then printf '<key %s> ' "$i"; else printf -- '- '; fi; done)\""
		fi
		if [ "$kind" != crash ]; then
			echo "   cluster.sh -n $n -t $VM_LIMIT --mtu $mtu$shown -e HISTORY_ARGS=\"$args\" -- history-node.sh ib $secs"
			"$TOOLS/cluster.sh" -n "$n" -t "$VM_LIMIT" -o "$dir" --mtu "$mtu" ${env[@]+"${env[@]}"} \
				-e HISTORY_ARGS="$args" -- "$TOOLS/history-node.sh" ib "$secs" 2>&1 &
			child=$!
			wait "$child"
			child=""
			nodes=""
			for ((i = 0; i < n; i++)); do nodes+="${nodes:+,}$(cat "$dir/node-$i.rc" 2>/dev/null || echo -)"; done
		else
			echo "   lib.sh: $n nodes with HISTORY_ARGS=\"$args\"; node 1 killed $KILL_AFTER s after its first send, started again"
			cluster_init "$dir" "$n" 1500 "$VM_LIMIT" -e HISTORY_ARGS="$args" -- "$TOOLS/history-node.sh" ib "$secs" || exit 2
			for ((i = 0; i < n; i++)); do cluster_start_node "$i"; done
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
			# every node's code; node 1: its killed instance's > its restart's
			nodes=""
			for ((i = 0; i < n; i++)); do
				nodes+="${nodes:+,}$([ "$i" = 1 ] && printf '%s>' "$rc10")$(cat "$dir/node-$i.rc" 2>/dev/null || echo -)"
			done
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
			[ -f "$f" ] || continue
			sed "s|^|   ${f##*/}: |" "$f"
			awk -F'\t' '$1 == "in-effect" { a = $2 } $1 == "lifting" { b = $2 }
				END { if (a && b) printf "   fault window (in-effect to lifting): %.2f s\n", (b - a) / 1000 }' "$f"
		done
		refused=""
		if [ "$kind" = key ]; then
			refused=--refused
			# The engine's view of the refusal: its authentication and connection counters.
			for f in "$dir"/share/node-*.tsv; do
				[ -f "$f" ] || continue
				echo "   ${f##*/} counters at its end: $(awk -F'\t' '$1 == "stats" { n = split($3, kv, " ")
					for (i = 1; i <= n; i++) if (kv[i] ~ /^(dropped_unauthenticated|dropped_unverified|dropped_replayed|dropped_ahead|auth_|connections_created|possible_losses|packets_in|packets_out)/)
						printf "%s ", kv[i]; found = 1 } END { if (!found) printf "no stats line" }' "$f")"
			done
		fi
		java -cp "$CP" io.ibdxnet.app.cluster.HistoryCheck $refused --scenario "$label.$run" "$dir/share" > "$dir/check.txt" 2>&1
		crc=$?
		cat "$dir/check.txt"
		# A pass: HistoryCheck passed and every node exited 0 (crash-restart: the
		# killed instance aside); the key scenarios: nothing crossed, and every
		# node counted the other's packets as unauthenticated.
		[ "$crc" = 0 ] || fail=1
		[[ "$(sed 's/[^,>]*>//' <<< "$nodes")" =~ ^0(,0)*$ ]] || fail=1
		if [ "$kind" = key ]; then
			read -r crossed unauth < <(key_figures "$dir/share")
			echo "   across the key boundary: $crossed messages received or requests handled; dropped_unauthenticated per node: $unauth"
			echo "   sends failed by reason: $(cat "$dir"/share/node-*.tsv | awk -F'\t' '$1 == "send" && $7 == "fail" { n[$8]++ }
				END { for (r in n) printf "%s:%d ", r, n[r] }')"
			[ "$crossed" = 0 ] || { fail=1; echo "   FAIL: data crossed the key boundary"; }
			[[ "$unauth" =~ ^[1-9][0-9]*(/[1-9][0-9]*)*$ ]] || { fail=1; echo "   FAIL: a node did not count refused packets (or wrote no stats)"; }
		fi
		r=$(row "$label" "$run" "$nodes" "$crc" "$dir/check.txt" "$dir/share" "$kind" "$none_lost")
		echo "$r" >> "$out/table.txt"
		[[ "$r" != *"promised none)" ]] || fail=1
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
