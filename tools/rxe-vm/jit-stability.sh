#!/bin/bash
# Runs the Java tests over verbs in the Soft-RoCE VM N times under one qemu
# accelerator setting and counts how each run ended — the experiment behind
# the choice of single-threaded TCG for JVMs (RELIABILITY.md, "VM crash").
#
#   tools/rxe-vm/jit-stability.sh [-n RUNS] [-a ACCEL] [-x JAVA_OPTS] [-t TRANSPORT] [TEST_CLASS...]
#     -n RUNS     repetitions (default 5)
#     -a ACCEL    RXE_VM_ACCEL value (default "tcg,thread=single"; "tcg,thread=multi"
#                 is qemu's default for two vCPUs)
#     -x OPTS     extra JVM options (e.g. "-XX:TieredStopAtLevel=1")
#     -t TRANSPORT  transport of TwoProcessTest (default ib; nio: no native code in the JVM)
#     TEST_CLASS  JUnit classes (default io.ibdxnet.VerbsDXNetTest io.ibdxnet.nio.TwoProcessTest)
# Needs `gradle testClasspathFile` and a release build. Prints one line per run
# and a summary: passed / failed (test failure) / crashed (JVM crash report) / timeout.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
runs=5 accel="tcg,thread=single" xopts="" transport=ib
while getopts n:a:x:t: o; do
	case $o in n) runs=$OPTARG ;; a) accel=$OPTARG ;; x) xopts=$OPTARG ;; t) transport=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
classes=("$@")
[ ${#classes[@]} -gt 0 ] || classes=(io.ibdxnet.VerbsDXNetTest io.ibdxnet.nio.TwoProcessTest)
cp_file="$ROOT/build/test-classpath.txt"
[ -f "$cp_file" ] || { echo "jit-stability: run 'gradle testClasspathFile' first" >&2; exit 2; }
cp=$(cat "$cp_file")
log_dir=$(mktemp -d /tmp/jit-stability.XXXXXX)
passed=0 failed=0 crashed=0 timedout=0
for i in $(seq 1 "$runs"); do
	log="$log_dir/run-$i.log"
	start=$(date +%s)
	# shellcheck disable=SC2086
	RXE_VM_ACCEL="$accel" "$ROOT/tools/rxe-vm/run-in-rxe-vm.sh" -t 900 -e IBDXNET_REQUIRE_RDMA=1 \
		-e "JAVA_EXTRA_OPTS=$xopts" "$ROOT/tools/rxe-vm/java-in-vm.sh" -cp "$cp" \
		-Djava.library.path="$ROOT/target/release" -Dtest.twoProcessTransport=$transport -Dtest.classpath="$cp" \
		org.junit.runner.JUnitCore "${classes[@]}" >"$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	if grep -q '== JVM crash report' "$log"; then
		crashed=$((crashed + 1)); what="CRASH $(grep -m1 -o 'siginfo: si_signo: [0-9]* ([A-Z]*)' "$log")"
	elif [ $rc = 124 ]; then timedout=$((timedout + 1)); what="TIMEOUT"
	elif [ $rc = 0 ]; then passed=$((passed + 1)); what="ok"
	else failed=$((failed + 1)); what="FAILED rc=$rc"
	fi
	echo "run $i/$runs: $what (${secs} s, $log)"
done
echo "jit-stability: accel=$accel opts='$xopts' transport=$transport classes=${classes[*]}: $runs runs, $passed passed, $failed failed, $crashed crashed, $timedout timed out"
[ $((failed + crashed + timedout)) = 0 ]
