#!/bin/bash
# cluster-vs-one-vm.sh - the cluster matrix's baseline workload (two
# HistoryNodes, ib over rxe0, fabric verbs; each sends the other 500 msg/s of
# 64 B and 20 requests/s with a 5 s deadline, 20 s of sending from 60 s after
# the launch, lingering up to 10 s) run twice, one after the other:
#   two-vms  across 2 VMs (tools/cluster-vm/cluster.sh -n 2: two kernels, rxe0
#            on virtio NICs joined by a qemu dgram pair), 1 vCPU and 2 GiB each
#   one-vm   as two processes inside ONE VM (tools/rxe-vm/run-in-rxe-vm.sh,
#            tools/cluster-vm/one-vm-pair.sh: rxe0 on dummy0, Soft-RoCE loopback
#            in one kernel), 2 vCPUs and 4 GiB
# and prints one table: per direction the messages sent (accepted) and
# delivered, the rates achieved (accepted over the sender's span from first to
# last send, delivered over the receiver's span from first to last receive),
# the requests sent / answered / failed and the answered ones' round trip p50 /
# p99 (from the histories: the requester's reqend minus its req line, ms on
# one clock), and per run HistoryCheck's lost-unreported, hung and verdict.
#
#   bench/cluster-vs-one-vm.sh [-o DIR] [-p two-vms,one-vm]
#
#   -o DIR   output (default bench/results/cluster-vs-one-vm-<date>T<time>):
#            summary.txt (everything printed), two-vms/ and one-vm/ (node files,
#            share/ with the histories, check.txt)
#   -p PARTS which runs, in this order (default both)
#
# Both runs use RXE_VM_ACCEL (tcg,thread=single): the two VMs have a host
# thread each, the one VM's two vCPUs share one host thread. One VM job at a
# time; `uptime` is printed before and after each run. Environment: STARTUP_S
# (60), SEND_SECONDS (20), NODE_ARGS (more HistoryNode options, last).
# Needs build/main-classpath.txt (gradle mainClasspathFile) and target/release.
# Exit 0 only if both runs' nodes exited 0 and HistoryCheck passed.

set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools/cluster-vm
out="" parts="two-vms one-vm"
while getopts "o:p:h" opt; do
	case "$opt" in
	o) out=$OPTARG ;;
	p) parts=${OPTARG//,/ } ;;
	h) sed -n '2,30p' "$0"; exit 0 ;;
	*) sed -n '18,23p' "$0" >&2; exit 2 ;;
	esac
done
for p in $parts; do
	case "$p" in two-vms|one-vm) ;; *) echo "cluster-vs-one-vm: unknown part $p" >&2; exit 2 ;; esac
done
CP_FILE=$ROOT/build/main-classpath.txt
[ -f "$CP_FILE" ] || { echo "no $CP_FILE: run 'gradle mainClasspathFile' first" >&2; exit 2; }
[ -f "$ROOT/target/release/libibdxnet.so" ] || { echo "no target/release/libibdxnet.so" >&2; exit 2; }
CP=$(cat "$CP_FILE")
out=${out:-$ROOT/bench/results/cluster-vs-one-vm-$(date +%Y-%m-%dT%H%M)}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
[ -e "$out/summary.txt" ] && { echo "cluster-vs-one-vm: $out already has a summary.txt" >&2; exit 2; }

STARTUP_S=${STARTUP_S:-60}
SEND_SECONDS=${SEND_SECONDS:-20}
VM_LIMIT=${VM_LIMIT:-300}
# bench/cluster-matrix.sh's baseline, word for word
BASE_ARGS="--rate 500 --requests-per-second 20 --deadline-ms 5000 --linger-ms 10000${NODE_ARGS:+ $NODE_ARGS}"
export RXE_VM_ACCEL=${RXE_VM_ACCEL:-tcg,thread=single}

exec > >(tee -a "$out/summary.txt") 2>&1

echo "cluster-vs-one-vm: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores, $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo '+changes')"
echo "command: $0 -o $out -p ${parts// /,}"
echo "settings: sending from launch + $STARTUP_S s for $SEND_SECONDS s, HistoryNode $BASE_ARGS; RXE_VM_ACCEL=$RXE_VM_ACCEL"

child=""
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT TERM
declare -A rcs=()

run_two_vms() {
	local dir=$out/two-vms start_at args
	start_at=$(( $(date +%s%3N) + STARTUP_S * 1000 ))
	args="$BASE_ARGS --start-at-ms $start_at --stop-at-ms $((start_at + SEND_SECONDS * 1000))"
	echo "   RXE_VM_MEM=2G RXE_VM_SMP=1 cluster.sh -n 2 -t $VM_LIMIT -e HISTORY_ARGS=\"$args\" -- history-node.sh ib $SEND_SECONDS"
	RXE_VM_MEM=2G RXE_VM_SMP=1 "$TOOLS/cluster.sh" -n 2 -t "$VM_LIMIT" -o "$dir" \
		-e HISTORY_ARGS="$args" -- "$TOOLS/history-node.sh" ib "$SEND_SECONDS" 2>&1 &
	child=$!
	wait "$child"
	rcs[two-vms]=$?
	child=""
}

run_one_vm() {
	local dir=$out/one-vm start_at args
	mkdir -p "$dir/share" || return 2
	start_at=$(( $(date +%s%3N) + STARTUP_S * 1000 ))
	args="$BASE_ARGS --start-at-ms $start_at --stop-at-ms $((start_at + SEND_SECONDS * 1000))"
	echo "   RXE_VM_MEM=4G RXE_VM_SMP=2 RXE_VM_SHARE=$dir/share run-in-rxe-vm.sh -t $VM_LIMIT -e ONE_VM_OUT=$dir/share -e HISTORY_ARGS=\"$args\" -- one-vm-pair.sh ib $SEND_SECONDS"
	RXE_VM_MEM=4G RXE_VM_SMP=2 RXE_VM_SHARE=$dir/share RXE_VM_CONSOLE=$dir/console \
		"$ROOT/tools/rxe-vm/run-in-rxe-vm.sh" -t "$VM_LIMIT" -e ONE_VM_OUT="$dir/share" \
		-e HISTORY_ARGS="$args" -- "$TOOLS/one-vm-pair.sh" ib "$SEND_SECONDS" > "$dir/vm.out" 2> "$dir/vm.err" &
	child=$!
	wait "$child"
	rcs[one-vm]=$?
	child=""
	cat "$dir/vm.out"
	tail -3 "$dir/vm.err"
}

fail=0
for p in $parts; do
	echo
	echo "-- $p ($(date -u +%H:%M:%S) UTC)"
	echo "   uptime before: $(uptime)"
	t0=$SECONDS
	case "$p" in two-vms) run_two_vms ;; one-vm) run_one_vm ;; esac
	echo "   $p ended after $((SECONDS - t0)) s, exit ${rcs[$p]}"
	echo "   uptime after: $(uptime)"
	[ "${rcs[$p]}" = 0 ] || fail=1
	java -cp "$CP" io.ibdxnet.app.cluster.HistoryCheck --scenario "$p" "$out/$p/share" > "$out/$p/check.txt" 2>&1 || fail=1
	cat "$out/$p/check.txt"
done

# figures SHARE SENDER DEST: one direction's "sent failed deliv sent/s deliv/s req ans
# fail p50 p99" from the histories node-SENDER.0.tsv and node-DEST.0.tsv.
figures() {
	local a=$1/node-$2.0.tsv b=$1/node-$3.0.tsv rtt p50 p99
	rtt=$(awk -F'\t' -v d="$3" '$1 == "req" && $3 == d { t[$4] = $2 }
		$1 == "reqend" && $3 == d && $5 == "answered" && ($4 in t) { print $2 - t[$4] }' "$a" 2>/dev/null | sort -n)
	p50=$(pct "$rtt" 50) p99=$(pct "$rtt" 99)
	awk -F'\t' -v s="$2" -v d="$3" -v p50="$p50" -v p99="$p99" '
		FNR == NR {
			if ($1 == "send" && $3 == d) { if ($7 == "ok") { ok++; if (!f) f = $2; l = $2 } else failed++ }
			if ($1 == "req" && $3 == d) req++
			if ($1 == "reqend" && $3 == d) { if ($5 == "answered") ans++; else if ($5 != "pending") rfail++ }
			next
		}
		$1 == "recv" && $3 == s && $8 == "ok" { if (!(($4 " " $5) in seen)) { seen[$4 " " $5] = 1; got++ }; if (!rf) rf = $2; rl = $2 }
		END {
			sr = l > f ? sprintf("%.0f", ok / ((l - f) / 1000)) : "-"
			dr = rl > rf ? sprintf("%.0f", got / ((rl - rf) / 1000)) : "-"
			printf "%d %d %d %s %s %d %d %d %s %s\n", ok, failed, got, sr, dr, req, ans, rfail, p50, p99
		}' "$a" "$b" 2>/dev/null
}

# pct "SORTED NUMBERS" P: the P-th percentile (nearest rank), - if none.
pct() {
	[ -n "$1" ] || { echo -; return; }
	awk -v p="$2" '{ v[NR] = $1 } END { r = int((p * NR + 99) / 100); if (r < 1) r = 1; print v[r] }' <<< "$1"
}

count() { sed -n "s/^   $1  *\([0-9][0-9]*\).*/\1/p" "$2" | head -1; }

FMT='%-8s %-4s %6s %5s %6s %7s %7s %5s %5s %5s %7s %7s %6s %5s %s\n'
echo
echo "== two VMs against one VM, the cluster matrix's baseline workload ($out)"
printf "$FMT" run dir sent fail deliv sent/s deliv/s req ans rfail rtt_p50 rtt_p99 LOST_U hung verdict
for p in $parts; do
	f=$out/$p/check.txt
	v=$(sed -n 's/^   verdict: //p' "$f" | head -1)
	for d in "0 1" "1 0"; do
		read -r s t <<< "$d"
		# shellcheck disable=SC2046
		printf "$FMT" "$p" "$s>$t" $(figures "$out/$p/share" "$s" "$t") \
			"$(count lost-unreported "$f")" "$(count 'requests hung past deadline' "$f")" "${v:-none}"
	done
done
echo "(rates in msg/s; rtt in ms, requester's clock, answered requests only; LOST_U, hung, verdict: HistoryCheck per run)"
echo "uptime at the end: $(uptime)"
echo "cluster-vs-one-vm: exit $fail"
exit $fail
