#!/bin/bash
# Run as: ROUNDS=5 FIRST=1 (first part), then ROUNDS=10 FIRST=6 appended to the same .txt
# A/B/C/D: where handlers run (pool | receiving thread: --handleOnReceivingThread false|true)
# × engine_threads (dedicated | shared) on ib (sim), and pool vs receiving thread on nio.
# 2 nodes, 64 B, 1 sender, 1 handler thread; interleaved, the order of the variants rotating per round.
cd /work/wt-inline
CP=$(cat build/bench-classpath.txt)
J=(java -Xms1g -Xmx1g -cp "$CP" -Djava.library.path=target/release io.ibdxnet.bench.Workload --nodes 2 --size 64 --threads 1 --handlers 1)
echo "# $(date -u) $(nproc) cores (availableProcessors), $(uname -r), $(java -version 2>&1 | head -1), commit $(git rev-parse --short HEAD)"
echo "# command: ${J[*]} --transport ib|nio --pattern uni --messages 3000000 | --pattern rtt --messages 20000, with --handleOnReceivingThread H [--native engine_threads=MODE on ib]"
IB=("ib dedicated false" "ib dedicated true" "ib shared false" "ib shared true")
NIO=("nio - false" "nio - true")
for round in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-5} - 1))); do
  echo "# round $round, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for pattern in uni rtt; do
    case $pattern in uni) a="--messages 3000000";; rtt) a="--messages 20000";; esac
    for set in IB NIO; do
      eval "vs=(\"\${$set[@]}\")"
      n=${#vs[@]}
      for k in $(seq 0 $((n - 1))); do
        v=(${vs[$(((k + round) % n))]})
        extra=(); [ "${v[1]}" != - ] && extra=(--native engine_threads=${v[1]})
        "${J[@]}" --transport ${v[0]} --pattern $pattern $a --handleOnReceivingThread ${v[2]} "${extra[@]}" 2>&1 \
          | grep -E '^RESULT' | sed "s/^/round=$round engine=${v[1]} handleOnReceivingThread=${v[2]} /"
      done
    done
  done
done
echo "# end $(date -u), load: $(cut -d' ' -f1-3 /proc/loadavg)"
