#!/bin/bash
# A/B: old = 827e634 (main), new = branch deadline; same libibdxnet.so, interleaved, 3 rounds.
cd /work/wt-deadline
DEPS=$(cat /tmp/dl/deps.txt)
OUT=bench/results/2026-11-25-deadlines-ab.txt
run() { # label classes args...
  local label=$1 classes=$2; shift 2
  echo "## $label"
  java -Xms1g -Xmx1g -cp "$classes:build/resources/main:$DEPS" -Djava.library.path=target/release io.ibdxnet.bench.Workload "$@" 2>&1 | grep '^RESULT'
}
{
echo "# A/B: deadlines (new = branch deadline $1, classes compiled with javac from the commit) vs old (827e634, main before it, compiled with javac), same libibdxnet.so (target/release of this worktree), interleaved, 3 rounds, $(date -u +%FT%TZ), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## command: java -Xms1g -Xmx1g -cp CLASSES:build/resources/main:DEPS -Djava.library.path=target/release io.ibdxnet.bench.Workload --transport ib --pattern uni --nodes 2 --size 64 --messages 3000000 --threads 1 --handlers 1   and   ... --pattern rtt --nodes 2 --size 64 --messages 20000 --threads 1 --handlers 1"
echo "## CLASSES: old = /tmp/dl/old/main:/tmp/dl/old/bench, new = /tmp/dl/new/main:/tmp/dl/new/bench; DEPS = the jars of build/bench-classpath.txt"
for round in 1 2 3; do
  for v in old new; do
    [ $round = 2 ] && v=$([ $v = old ] && echo new || echo old)  # swap the order in round 2
    run "round $round uni $v" /tmp/dl/$v/main:/tmp/dl/$v/bench --transport ib --pattern uni --nodes 2 --size 64 --messages 3000000 --threads 1 --handlers 1
  done
  for v in old new; do
    [ $round = 2 ] && v=$([ $v = old ] && echo new || echo old)
    run "round $round rtt $v" /tmp/dl/$v/main:/tmp/dl/$v/bench --transport ib --pattern rtt --nodes 2 --size 64 --messages 20000 --threads 1 --handlers 1
  done
done
echo "# end $(date -u +%FT%TZ), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} > $OUT
