#!/bin/bash
# Runs `java ARGS...` inside the Soft-RoCE VM the way the host's Java tests
# run (-Xcheck:jni); if the JVM dies, prints the crash report's thread,
# stack and signal sections (the VM's files do not reach the host).
#
#   tools/rxe-vm/run-in-rxe-vm.sh tools/rxe-vm/java-in-vm.sh -cp ... Main
set -u
# TCG's `-cpu max` advertises AVX levels it does not emulate faithfully: JIT
# code using them died with SIGILL/SIGSEGV in tiny compiled methods. Child
# JVMs (the two-process test) inherit this through JAVA_TOOL_OPTIONS. C1 only:
# C2's compilations cost more emulated time than they save in runs this short
# (upstream's DXNetMain pair, messages, one A/B on a loaded host: 93 s, 150 s).
export JAVA_TOOL_OPTIONS="-XX:UseAVX=0 -XX:TieredStopAtLevel=1"
rm -f /tmp/hs_err_*.log
# JAVA_EXTRA_OPTS: further JVM options for experiments (jit-stability.sh).
# shellcheck disable=SC2086
java -Xcheck:jni -XX:ErrorFile=/tmp/hs_err_%p.log ${JAVA_EXTRA_OPTS:-} "$@"
rc=$?
for f in /tmp/hs_err_*.log; do
	[ -f "$f" ] || continue
	echo "== JVM crash report $f"
	grep -B2 -A45 '^Current thread' "$f"
	grep -A10 '^siginfo' "$f"
done
exit $rc
