# shellcheck shell=bash
# Sourced by ./ibdxnet: the stages of `./ibdxnet test` (test_all, in order)
# and each stage's own function: the Soft-RoCE VM and the cluster, valgrind,
# AddressSanitizer, the Java test summaries, and examples/ (`example`).

vm_test() {
	if [ "${IBDXNET_SKIP_VM:-0}" = 1 ]; then
		[ "${CI:-}" = true ] && { echo "IBDXNET_SKIP_VM is not allowed in CI" >&2; exit 1; }
		say "SKIPPED: Soft-RoCE VM tests (IBDXNET_SKIP_VM=1)"
		return 0
	fi
	say "the Rust tests that touch RDMA or the kernel, on Soft-RoCE (rxe0) in one qemu VM, RDMA required (the library's unit tests, conformance on verbs and sim, engine on verbs, configuration errors, fabric selection)"
	# The sim-only test binaries ran on the host (stage 3) and under ASan;
	# here the ones that need a device or differ by kernel. The VM emulates
	# its 2 CPUs (TCG): tests run one at a time (parallel engines spinning on
	# 2 emulated CPUs took 268 s instead of 155 s for engine_sim), the long
	# streams are shortened (the host run keeps the full sizes), and no
	# RUST_BACKTRACE (symbolising one expected panic took 18 s there).
	"$ROOT/tools/rxe-vm/cargo-test-in-vm.sh" -t 1500 -e IBDXNET_REQUIRE_RDMA=1 -e IBDXNET_STREAM_MIB=16 \
		-- --release --locked -p ibdxnet --lib --test conformance --test engine_verbs --test config_errors \
		--test selection -- --test-threads=1
}

# The JVMs on Soft-RoCE: TCG single-threaded (one host core), so a CPU-bound
# stage of one thread can run beside them (test_all puts valgrind there).
vm_java_test() {
	[ "${IBDXNET_SKIP_VM:-0}" = 1 ] && return 0
	say "Java DXNet over verbs (JNI) on Soft-RoCE in a qemu VM: one process, and two (receiver killed with SIGKILL, restarted)"
	classpath_files testClasspathFile
	# JVMs run on single-threaded TCG: with one emulation thread per vCPU, JIT
	# code died in about 1 of 4 runs (SIGILL/SIGSEGV in C1-compiled method
	# prologues, also in a JVM without native code; RELIABILITY.md).
	local cp
	cp=$(cat "$ROOT/build/test-classpath.txt")
	RXE_VM_ACCEL="tcg,thread=single" "$ROOT/tools/rxe-vm/run-in-rxe-vm.sh" -t 1200 -e IBDXNET_REQUIRE_RDMA=1 \
		"$ROOT/tools/rxe-vm/java-in-vm.sh" -cp "$cp" -Djava.library.path="$ROOT/target/release" \
		-Dtest.twoProcessTransport=ib -Dtest.classpath="$cp" -Dtest.demoMessages=5000 -Dtest.timeoutMs=120000 -Dtest.failureDetectionMs=60000 \
		io.ibdxnet.TimedJUnit io.ibdxnet.VerbsDXNetTest io.ibdxnet.nio.TwoProcessTest
	say "upstream DXNet's own DXNetMain (unchanged jars, compat/upstream) over libibdxnet.so on Soft-RoCE: two JVMs, messages, then the pair again with requests"
	classpath_files upstreamClasspathFile
	RXE_VM_ACCEL="tcg,thread=single" "$ROOT/tools/rxe-vm/run-in-rxe-vm.sh" -t 900 "$ROOT/compat/upstream/dxnetmain-ib.sh" 1000 64 100
	say "loopback benchmark smoke on Soft-RoCE next to ib_send_bw"
	cargo build --release --locked -p ibdxnet --bin ibdxnet-loopback
	"$ROOT/tools/rxe-vm/run-in-rxe-vm.sh" -t 300 "$ROOT/bench/rxe-compare.sh" 65536 1
	say "request/response latency smoke on Soft-RoCE next to ib_send_lat"
	classpath_files benchClasspathFile
	RXE_VM_ACCEL="tcg,thread=single" "$ROOT/tools/rxe-vm/run-in-rxe-vm.sh" -t 600 "$ROOT/bench/rxe-latency.sh" 64 200
}

# Two VMs, each its own kernel with rdma_rxe on a virtio NIC, one Ethernet
# segment on this host (tools/cluster-vm): RDMA between the kernels, with 5 %
# loss, a VM crashed and started again, and our DXNet across them with loss,
# judged by the history checker.
cluster_test() {
	[ "${IBDXNET_SKIP_VM:-0}" = 1 ] && return 0
	local out
	out=$(mktemp -d)
	say "a cluster of two VMs (two kernels, Soft-RoCE on virtio NICs, one segment): verbs across them, with 5 % loss on one NIC, then one VM crashed and restarted"
	"$ROOT/tools/cluster-vm/cluster.sh" -n 2 -t 300 -o "$out/smoke" -e SMOKE_ITERS=300 -- "$ROOT/tools/cluster-vm/smoke.sh" ||
		{ tail -n 40 "$out"/smoke/node-*.out "$out"/smoke/node-*.err >&2; exit 1; }
	"$ROOT/tools/cluster-vm/restart-demo.sh" "$out/restart" ||
		{ tail -n 40 "$out"/restart/node-*.out "$out"/restart/node-*.err >&2; exit 1; }
	say "our DXNet across the two VMs (HistoryNode, ib on rxe0, all to all) with 5 % loss on both NICs; HistoryCheck: nothing lost unreported, duplicated, reordered, corrupted or hung"
	classpath_files mainClasspathFile
	local cp
	cp=$(cat "$ROOT/build/main-classpath.txt")
	RXE_VM_ACCEL="tcg,thread=single" RXE_VM_MEM=2G "$ROOT/tools/cluster-vm/cluster.sh" -n 2 -t 300 -o "$out/history" \
		-e HISTORY_FAULT="loss 5" -e HISTORY_ARGS="--rate 500 --requests-per-second 20 --deadline-ms 5000 --linger-ms 10000" \
		-- "$ROOT/tools/cluster-vm/history-node.sh" ib 15 ||
		{ tail -n 40 "$out"/history/node-*.out "$out"/history/node-*.err >&2; exit 1; }
	java -cp "$cp" io.ibdxnet.app.cluster.HistoryCheck --scenario two-vms-ib-loss-5 "$out/history/share" || exit 1
	rm -rf "$out"
}

# Memory checking of the native code (fabric and engine paths) under valgrind;
# spin-heavy tests are skipped (valgrind serialises threads).
# Fails when a test filter matches no test of TEST: a renamed test would
# otherwise drop out of a pass without a word.
require_filters() {
	local test=$1 f n
	shift
	for f in "$@"; do
		n=$(cargo test --release --locked -p ibdxnet --test "$test" -- --list "$f" 2>/dev/null | grep -c ': test$' || true)
		[ "$n" -gt 0 ] || { echo "test filter '$f' matches no test in tests/$test.rs: update tools/cli/test-stages.sh" >&2; exit 1; }
	done
}

valgrind_test() {
	say "valgrind (memcheck) on the sim conformance suite, five engine tests, config errors, faults, lock-free structures, fuzz and soak"
	local vg="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-possibly-lost=no -q"
	local engine_tests=(simultaneous flow_control lost_exchange node_removal orderly_close_finishes)
	require_filters conformance sim:: concurrent
	require_filters engine_sim "${engine_tests[@]}"
	require_filters lockfree_stress queue_conserves
	require_filters udp_fuzz with_a_key
	CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$vg" \
		cargo test --release --locked -p ibdxnet --test conformance -- sim:: --skip concurrent --test-threads=1
	CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$vg" \
		cargo test --release --locked -p ibdxnet --test engine_sim -- --test-threads=1 "${engine_tests[@]}"
	CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$vg" \
		cargo test --release --locked -p ibdxnet --test config_errors --test sim_faults --test lockfree_stress \
		-- --test-threads=1 --skip queue_conserves
	# The keyed fuzz run is left to AddressSanitizer: HMAC under valgrind took over 8 minutes.
	IBDXNET_SOAK_SECONDS=2 IBDXNET_FUZZ_DATAGRAMS=2000 CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$vg" \
		cargo test --release --locked -p ibdxnet --test udp_fuzz --test soak_sim -- --test-threads=1 --skip with_a_key
}

# AddressSanitizer (LeakSanitizer too) over the Rust tests and the JNI tests;
# a deliberate overflow must be reported first (tools/asan/run.sh).
asan_test() {
	"$ROOT/tools/asan/run.sh"
}

# One "java: N passed, N failed" line from Gradle's JUnit XML reports.
java_summary() {
	local t=0 f=0 e=0 s=0 x
	for x in "$ROOT"/build/test-results/test/TEST-*.xml; do
		[ -f "$x" ] || continue
		t=$((t + $(sed -n 's/.*<testsuite [^>]*tests="\([0-9]*\)".*/\1/p' "$x" | head -1)))
		f=$((f + $(sed -n 's/.*<testsuite [^>]*failures="\([0-9]*\)".*/\1/p' "$x" | head -1)))
		e=$((e + $(sed -n 's/.*<testsuite [^>]*errors="\([0-9]*\)".*/\1/p' "$x" | head -1)))
		s=$((s + $(sed -n 's/.*<testsuite [^>]*skipped="\([0-9]*\)".*/\1/p' "$x" | head -1)))
	done
	echo "java: $((t - f - e - s)) passed, $((f + e)) failed, $s skipped"
}

# Each failed Java test from the JUnit XML reports: its name and the first
# lines of its failure (gradle -q prints neither).
java_failures() {
	local x
	for x in "$ROOT"/build/test-results/test/TEST-*.xml; do
		[ -f "$x" ] || continue
		awk '/<testcase /{ tc = $0; n = 0 }
			/<(failure|error) /{ print "FAILED: " tc; n = 60 }
			n > 0 { print; n--; if ($0 ~ /<\/(failure|error)>/) n = 0 }' "$x"
		# The failed class's own output (figures, peers' logs): its last 40 lines.
		if grep -q '<failure \|<error ' "$x"; then
			echo "OUTPUT of $(basename "$x" .xml) (last 40 lines):"
			awk '/<system-out>/{ on = 1 } on { print } /<\/system-out>/{ on = 0 }' "$x" | tail -40
		fi
	done
}

test_all() {
	setup
	say "format and lints"
	cargo fmt --all -- --check
	cargo clippy --locked --all-targets -- -D warnings
	# The JMH-only natives (jni/bench.rs) are compiled only with this feature.
	cargo clippy --locked -p ibdxnet --lib --features bench-natives -- -D warnings
	say "Rust tests on the host"
	cargo test --release --locked --workspace
	ensure_jdk25
	say "build the jar and the test classes; write every classpath file the later stages read"
	rm -rf "$ROOT/build/test-results/test"
	# One Gradle start for every classpath file (each start costs about 10 s):
	# the later stages skip theirs then. test25.args: the JDK 25 run's JVM.
	gradle --no-daemon -q -Pjdk25Home="$JDK25" -PallTests25 jar testClasses test25Argfile \
		testClasspathFile compatClasspathFile upstreamClasspathFile benchClasspathFile mainClasspathFile
	export IBDXNET_CLASSPATHS=ready
	# Every test class on JDK 25 against the multi-release jar (the FFM memory
	# layer), in a JVM beside the JDK 17 run: each suite keeps about half a
	# core busy (most tests wait on their peers), so on two cores they share
	# the time instead of adding it. Its output follows the JDK 17 run's.
	local t25 t25log
	t25log=$(mktemp)
	"$JDK25/bin/java" @"$ROOT/build/test25.args" >"$t25log" 2>&1 &
	t25=$!
	# Expanded now: the trap may run after this function's locals are gone.
	trap "kill $t25 2>/dev/null || true" EXIT
	say "Java tests on JDK 17 (JUnit 4 via Gradle, -Xcheck:jni, class directories: the Unsafe memory layer), then upstream DXNet's MsgrcJNIBinding (compat/upstream/jars/dxnet.jar) against the library (-Xcheck:jni, sim); Temurin 25 beside them"
	if ! gradle --no-daemon -q -Pjdk25Home="$JDK25" test compatTest; then
		java_summary
		java_failures
		exit 1
	fi
	java_summary
	say "Java tests on Temurin 25 against the multi-release jar (the FFM memory layer), run beside the JDK 17 tests"
	if ! wait "$t25"; then
		grep -v '^\.*$' "$t25log" | tail -400
		echo "Java tests on Temurin 25 failed" >&2
		exit 1
	fi
	trap - EXIT
	grep -E '^(Time|OK \()' "$t25log"
	rm -f "$t25log"
	asan_test
	say "upstream DXNet's own DXNetMain (unchanged) on this host: two JVMs over libibdxnet.so on simhost and over upstream's NIO, upstream's default configuration (100 ms request timeout), one round, our DemoMain pair beside"
	ROUNDS=1 "$ROOT/compat/upstream/dxnetmain-host.sh" 20000 300
	say "benchmark smoke runs (--quick)"
	bench jni --quick
	bench memory --quick
	bench loopback --quick
	bench workloads --quick
	bench soak --quick
	say "examples/ against the published artifact"
	example_test
	vm_test
	cluster_test
	# valgrind serialises a program's threads onto one core, and the VM's Java
	# stages emulate on one host thread: on two cores they run side by side.
	local vglog vgpid
	vglog=$(mktemp)
	say "valgrind, beside the VM's Java stages (its output follows theirs)"
	valgrind_test >"$vglog" 2>&1 &
	vgpid=$!
	trap "kill $vgpid 2>/dev/null || true" EXIT
	vm_java_test
	if ! wait "$vgpid"; then
		cat "$vglog"
		echo "valgrind stage failed" >&2
		exit 1
	fi
	trap - EXIT
	cat "$vglog"
	rm -f "$vglog"
}

# examples/ as a user builds it: against the published artifact only (a fresh
# repository, a clean Gradle user home: nothing from our build leaks in; gson comes
# from Maven Central), then run: both nodes in one JVM over nio and ib (sim), and
# two processes over nio from the configuration files.
example_test() {
	local version tmp start
	version=$(sed -n 's/^version=//p' "$ROOT/gradle.properties")
	grep -q "compile 'io.ibdxnet:ibdxnet:$version'" "$ROOT/examples/build.gradle" || {
		echo "examples/build.gradle does not depend on io.ibdxnet:ibdxnet:$version (gradle.properties)" >&2
		exit 1
	}
	tmp=$(mktemp -d)
	start=$SECONDS
	say "publish io.ibdxnet:ibdxnet:$version into $tmp/m2"
	publish "$tmp/m2"
	say "examples/: build against the published artifact (clean Gradle user home $tmp/gradle) (publish: $((SECONDS - start)) s)"
	start=$SECONDS
	rm -rf "$ROOT/examples/build" "$ROOT/examples/.gradle"
	gradle -g "$tmp/gradle" --no-daemon -q -p "$ROOT/examples" -Dmaven.repo.local="$tmp/m2" installDist
	say "examples/ built in $((SECONDS - start)) s; running it"
	# Plain `java` on the installed classpath (Debian's start script prints `java -version`).
	local cp="$ROOT/examples/build/install/ibdxnet-example/lib/*" t jdk
	local run=(--enable-native-access=ALL-UNNAMED -cp "$cp" example.Example)
	for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
		[ -x "$jdk/bin/java" ] || continue
		for t in nio ib; do
			echo "$(basename "$jdk"), $t, both nodes in one JVM:"
			# nio never loads the library: a path that cannot load proves it.
			timeout 120 "$jdk/bin/java" $([ "$t" = nio ] && echo -Dibdxnet.library=/nonexistent) "${run[@]}" "$t"
		done
	done
	echo "nio, two processes (examples/nio-node0.properties, nio-node1.properties):"
	(cd "$ROOT/examples" && timeout 120 java "${run[@]}" server nio-node0.properties) &
	local server=$! i
	# The client connects once: start it when node 0 listens.
	for i in $(seq 100); do
		ss -Hltn 'sport = :22230' | grep -q . && break
		sleep 0.2
	done
	(cd "$ROOT/examples" && timeout 120 java "${run[@]}" client nio-node1.properties) || { kill "$server" 2>/dev/null; exit 1; }
	wait "$server"
	if ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
		# fabric=verbs in the ib files: without a device, a clear error at start (never sim).
		echo "ib, two processes, without an RDMA device: node 0 must refuse to start"
		local out
		if out=$(cd "$ROOT/examples" && timeout 120 java "${run[@]}" server ib-node0.properties 2>&1); then
			echo "ib-node0.properties started without an RDMA device" >&2
			exit 1
		fi
		grep -m1 'no RDMA device found' <<<"$out" || { echo "$out" >&2; exit 1; }
	fi
	rm -rf "$tmp"
}
