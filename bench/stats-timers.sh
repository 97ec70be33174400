#!/bin/sh
# The cost of the engine's operation timers (native key stats_timers):
#   bench/stats-timers.sh > bench/results/DATE-stats-timers.txt
# Per workload, 3 rounds of one run with the timers on and one with them off,
# interleaved (the 2-core VMs are noisy: compare within a round); each JSON
# line carries the timed operations and the process CPU of its window. Then
# what one timed operation costs (--measure-timer), 3 times.
cd "$(dirname "$0")/.."
B=target/release/ibdxnet-loopback
date -u
for w in "--nodes 2 --one-way --recv-buffer 4096 --sges 1" "--nodes 2 --one-way --recv-buffer 1024 --sges 1" "--nodes 2"; do
  for r in 1 2 3; do
    for t in true false; do
      echo "# round $r: ibdxnet-loopback --fabric sim $w --duration 5 --json --set stats_timers=$t"
      $B --fabric sim $w --duration 5 --json --set stats_timers=$t
    done
  done
done
for r in 1 2 3; do
  echo "# ibdxnet-loopback --measure-timer"
  $B --measure-timer
done
