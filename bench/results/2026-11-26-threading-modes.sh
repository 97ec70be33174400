#!/bin/bash
# A/B: engine_threads=dedicated vs shared, 2 nodes ib on sim, interleaved, order alternating.
cd /work/wt-threading
CP=$(cat build/bench-classpath.txt)
J=(java -Xms1g -Xmx1g -cp "$CP" -Djava.library.path=target/release io.ibdxnet.bench.Workload --transport ib --nodes 2 --size 64 --threads 1 --handlers 1)
echo "# $(date -u) $(nproc) cores, $(uname -r), $(java -version 2>&1 | head -1), commit $(git rev-parse --short HEAD)"
echo "# command: ${J[*]} --pattern uni --messages 3000000 | --pattern rtt --messages 20000, each with --native engine_threads=MODE"
for round in $(seq 1 ${ROUNDS:-3}); do
  if [ $((round % 2)) = 1 ]; then order="dedicated shared"; else order="shared dedicated"; fi
  echo "# round $round, order: $order, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for pattern in ${PATTERNS:-uni rtt}; do
    case $pattern in uni) a="--messages 3000000";; rtt) a="--messages 20000";; idle) a="--seconds 5";; esac
    for mode in $order; do
      "${J[@]}" --pattern $pattern $a --native engine_threads=$mode 2>&1 | grep -E '^(RESULT|IDLE)' | sed "s/^/round=$round /"
    done
  done
done
echo "# end $(date -u), load: $(cut -d' ' -f1-3 /proc/loadavg)"
