# shellcheck shell=bash
# Sourced by ./ibdxnet: `./ibdxnet bench SUITE [--quick]`, every suite
# (jni, memory, loopback, soak, fuzz, auth, fairness, workloads, cluster).

# JMH goes on after a benchmark that throws (and exits 0): its "<failure>"
# marks in the output fail the run instead.
jmh_failed() {
	if grep -q '<failure>' "$1"; then
		echo "JMH: a benchmark failed (see <failure> in $1)" >&2
		exit 1
	fi
}

bench() {
	setup
	local suite=${1:-} quick=0
	[ "${2:-}" = --quick ] && quick=1
	mkdir -p "$ROOT/bench/results"
	case "$suite" in
	jni)
		local out="$ROOT/bench/results/$(date +%Y-%m-%d)-jni-cost.json" args="JniCost"
		[ $quick = 1 ] && { args="-f 1 -wi 1 -i 1 -w 1 -r 1 JniCost"; out=$(mktemp --suffix=.json); }
		gradle --no-daemon -q jmh -PjmhArgs="-rf json -rff $out $args" 2>&1 | tee "$out.log"
		jmh_failed "$out.log"
		echo "results: $out"
		;;
	memory)
		ensure_jdk25
		# The same benchmark on JDK 25 twice: class directories (Unsafe), then the jar (FFM).
		local m out args="MemoryAccess" stamp
		stamp=$(date +%Y-%m-%d)
		[ $quick = 1 ] && args="-f 1 -wi 1 -i 1 -w 200ms -r 200ms MemoryAccess"
		for m in unsafe ffm; do
			out="$ROOT/bench/results/$stamp-memory-$m-jdk25"
			[ $quick = 1 ] && out=$(mktemp -u)
			gradle --no-daemon -q jmh25 -Pjdk25Home="$JDK25" -Pmemory=$m -PjmhArgs="-rf json -rff $out.json $args" 2>&1 | tee "$out.txt"
			jmh_failed "$out.txt"
			echo "results: $out.json"
		done
		;;
	loopback)
		cargo build --release --locked -q -p ibdxnet --bin ibdxnet-loopback
		"$ROOT/target/release/ibdxnet-loopback" --nodes 2 --duration "$([ $quick = 1 ] && echo 1 || echo 5)" --json
		;;
	soak)
		# The engine soak (records on sim under network faults), then the DXNet
		# soak (sequence-numbered messages among 3 nodes, ib on sim and nio), then
		# the same under connection churn.
		IBDXNET_SOAK_SECONDS="$([ $quick = 1 ] && echo 6 || echo "${IBDXNET_SOAK_SECONDS:-600}")" \
			cargo test --release --locked -p ibdxnet --test soak_sim -- --nocapture
		classpath_files testClasspathFile
		local t
		for t in ib nio; do
			java -cp "$(cat "$ROOT/build/test-classpath.txt")" -Djava.library.path="$ROOT/target/release" \
				io.ibdxnet.soak.Soak --transport "$t" --messages "$([ $quick = 1 ] && echo 100000 || echo "${IBDXNET_SOAK_MESSAGES:-10000000}")"
		done
		# Connection churn: 6 nodes with room for 2 connections each, bursts to one
		# node after another — connections are evicted all the time.
		for t in ib nio; do
			java -cp "$(cat "$ROOT/build/test-classpath.txt")" -Djava.library.path="$ROOT/target/release" \
				io.ibdxnet.soak.Soak --transport "$t" --churn --nodes 6 --messages "$([ $quick = 1 ] && echo 30000 || echo "${IBDXNET_CHURN_MESSAGES:-10000000}")"
		done
		# A slow receiver with stalls for minutes: every backlog within its bound.
		for t in ib nio; do
			java -cp "$(cat "$ROOT/build/test-classpath.txt")" -Djava.library.path="$ROOT/target/release" \
				io.ibdxnet.soak.SlowReceiverSoak --transport "$t" --seconds "$([ $quick = 1 ] && echo 5 || echo "${IBDXNET_SLOW_SECONDS:-180}")"
		done
		;;
	fuzz)
		# 10^6 UDP datagrams at the connection manager; 10^6 mutated frame streams
		# through the stream assembler and 5*10^5 per transport through a node's real
		# receive path (nio, ib on sim) with an honest node checked after each.
		cargo test --release --locked -p ibdxnet --test udp_fuzz -- --ignored --nocapture
		rm -rf "$ROOT/build/test-results/test"
		gradle --no-daemon -q test --tests 'io.ibdxnet.FrameFuzzTest' --tests 'io.ibdxnet.core.StreamAssemblerViolationTest' \
			-PfuzzCases="${IBDXNET_FRAME_FUZZ_CASES:-500000}" -PassemblerFuzzCases=1000000
		grep -ho 'frame fuzz over [^&]*\|StreamAssembler fuzz: [^&]*' "$ROOT"/build/test-results/test/*.xml
		;;
	auth)
		# Cost of the control plane's pre-shared key: packet rate and connect latency;
		# re-admission after a key holder pushed a node's sequence window (root: raw sockets).
		cargo test --release --locked -p ibdxnet --test udp_auth -- --ignored --nocapture auth_cost
		cargo test --release --locked -p ibdxnet --test udp_control -- --ignored --nocapture readmission_times
		;;
	fairness)
		# Issue 19's isolation scenarios with longer phases (10 s; --quick: the
		# test's own 2 s): a slowly handled source, a peer that never reads (own
		# processes and network namespaces, root), a keep-alive flood, 1 000 idle
		# sockets from a stranger, 32 senders of max-size messages (scaled, and at
		# the defaults with a 120 s send timeout in a 10 GiB JVM).
		local out="$ROOT/bench/results/$(date +%Y-%m-%d)-fairness-long.txt" ms=10000
		[ $quick = 1 ] && { out=$(mktemp); ms=2000; }
		rm -rf "$ROOT/build/test-results/test"
		IBDXNET_FAIRNESS_MS=$ms gradle --no-daemon -q test --tests 'io.ibdxnet.FairnessTest' \
			--tests 'io.ibdxnet.nio.NeverReadingPeerTest' --tests 'io.ibdxnet.nio.NioFloodTest' \
			--tests 'io.ibdxnet.nio.IdleFloodAdmissionTest' --tests 'io.ibdxnet.UnfinishedBudgetTest'
		{
			echo "# IBDXNET_FAIRNESS_MS=$ms ./ibdxnet bench fairness ($(date -u +%FT%TZ), $(git -C "$ROOT" rev-parse --short HEAD))"
			grep -ho 'FAIRNESS[^&]*\|NEVER-READS[^&]*\|SPILL[^&]*\|UnfinishedBudgetTest [^&]*\|NioFloodTest: [^&]*\|figure [^&]*' "$ROOT"/build/test-results/test/*.xml
		} | tee "$out"
		if [ $quick = 0 ]; then
			gradle --no-daemon -q testClasses testClasspathFile
			"$ROOT/bench/budget-run.sh" -Dtest.budgetDefaults=true -Dtest.budgetSendTimeoutMs=120000 2>&1 | tee -a "$out"
		fi
		echo "results: $out"
		;;
	workloads)
		classpath_files benchClasspathFile
		if [ $quick = 1 ]; then
			"$ROOT/bench/workloads.sh" --quick "$(mktemp -d)/workloads"
		elif [ "${2:-}" = --scale ]; then
			"$ROOT/bench/workloads.sh" --scale
		else
			"$ROOT/bench/workloads.sh"
		fi
		;;
	cluster)
		# Issue 29's scenario matrix: one HistoryNode per VM (tools/cluster-vm), ib
		# over rxe0, faults with fault.sh, a crash and restart; HistoryCheck per run.
		classpath_files mainClasspathFile
		if [ $quick = 1 ]; then
			"$ROOT/bench/cluster-matrix.sh" -r 1 -s baseline -o "$(mktemp -d)/cluster-matrix"
		else
			"$ROOT/bench/cluster-matrix.sh" "${@:2}"
		fi
		;;
	*)
		echo "usage: ./ibdxnet bench jni|memory|loopback|workloads|soak|fuzz|auth|fairness|cluster [--quick] (workloads: or --scale; cluster: or [-n N] [-r R] [-s NAME,...] [-o DIR])" >&2
		exit 2
		;;
	esac
}
