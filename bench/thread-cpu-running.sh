#!/bin/bash
# CPU share of every thread of the java processes running class PATTERN, over
# SECONDS, from /proc (utime+stime deltas): which threads compete for the cores.
#   bench/thread-cpu-running.sh PATTERN [SECONDS]   e.g. bench/thread-cpu-running.sh DXNetMain 5
# (bench/thread-cpu.sh starts a Workload run itself and sums threads by name)
# Prints "pid tid name cpu%" for threads above 1 %, then the sum per process.
set -u
PATTERN=$1
SECS=${2:-5}
HZ=$(getconf CLK_TCK)
pids=$(pgrep -f "java.*$PATTERN" | tr '\n' ' ')
[ -n "$pids" ] || { echo "no java process matches $PATTERN" >&2; exit 1; }
snap() {
	for p in $pids; do
		for t in /proc/$p/task/*; do
			# comm may hold spaces: take the fields after the closing parenthesis.
			local stat rest name
			stat=$(cat "$t/stat" 2>/dev/null) || continue
			name=${stat#*(}; name=${name%)*}; rest=${stat##*) }
			set -- $rest
			echo "$p ${t##*/} $((${12} + ${13})) ${name// /_}"
		done
	done
}
a=$(snap); sleep "$SECS"; b=$(snap)
join -j1 <(echo "$a" | awk '{print $1"/"$2, $3, $4}' | sort) <(echo "$b" | awk '{print $1"/"$2, $3}' | sort) |
	awk -v hz="$HZ" -v s="$SECS" '{pct = ($4 - $2) * 100 / hz / s; split($1, k, "/"); tot[k[1]] += pct;
		if (pct >= 1) printf "%s %s %-24s %6.1f %%\n", k[1], k[2], $3, pct}
		END {for (p in tot) printf "process %s total %6.1f %% of one core\n", p, tot[p]}' | sort -k1,1 -k5,5nr
