#!/usr/bin/env bash
# AddressSanitizer over the native code: the Rust tests (sim; with
# LeakSanitizer) and the Java tests that load libibdxnet.so through JNI
# (under -Xcheck:jni too: its warnings fail the run).
#
#   tools/asan/run.sh          all three steps; exit 0 only with zero reports
#
# Stable Rust has no -Zsanitizer; RUSTC_BOOTSTRAP=1 unlocks it (the ASan
# runtime ships with the stable std). Only the x86_64 target is instrumented
# (--target keeps build scripts and proc macros out). Rust links the runtime
# into executables only, so the JVM gets it preloaded: a shared object made
# from the toolchain's own static runtime (exactly the instrumentation's
# version; its .preinit_array part is not allowed in a shared object and
# LD_PRELOAD initialises it first anyway). The JVM uses SIGSEGV itself
# (implicit null checks, safepoints), hence handle_segv=0; leak checking is
# off in the JVM (its allocations outlive exit on purpose).
# A negative control proves reports would be seen: a JNI method with a
# deliberate heap overflow (native/asan-probe) must be reported.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
TARGET=x86_64-unknown-linux-gnu
export CARGO_TARGET_DIR="$ROOT/target/asan"
OUT="$CARGO_TARGET_DIR/$TARGET/release"
export RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address -Cdebug-assertions=on"
say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

say "AddressSanitizer + LeakSanitizer: Rust tests (sim)"
# One test at a time: config_errors counts the process's unnamed threads, and
# under ASan's slower timing a parallel test's threads were counted (flaky).
# The sanitizer checks every access of the code paths a test runs; the host's
# uninstrumented run already covers the full counts, so the counting tests run
# smaller here (as in the VM): fewer fuzz datagrams and wake-up hand-offs,
# 16 nodes for the mesh and 8 for the churn test (CI time).
IBDXNET_FUZZ_DATAGRAMS=20000 IBDXNET_WAKEUP_HANDOFFS=200000 IBDXNET_MESH_NODES=16 IBDXNET_CHURN_NODES=8 \
	cargo test --locked --release --target "$TARGET" --workspace --lib --bins --tests -- --test-threads=1 2>&1 | tee "$log/rust.txt"
if grep -q 'ERROR: \(AddressSanitizer\|LeakSanitizer\)' "$log/rust.txt"; then
	echo "asan: sanitizer reports in the Rust tests" >&2
	exit 1
fi

say "AddressSanitizer: JNI tests (Java over an instrumented libibdxnet.so)"
cargo build --locked --release --target "$TARGET" -p ibdxnet -p ibdxnet-asan-probe --lib
sysroot=$(rustc --print sysroot)
runtime=$(ls "$sysroot/lib/rustlib/$TARGET/lib/"librustc-*_rt.asan.a)
mkdir -p "$log/rt"
(cd "$log/rt" && ar x "$runtime" && rm -f asan_preinit.cpp.o)
gcc -shared -o "$OUT/libasan-runtime.so" "$log"/rt/*.o -lpthread -ldl -lm -lstdc++
[ "${IBDXNET_CLASSPATHS:-}" = ready ] || gradle --no-daemon -q testClasspathFile
cp=$(cat "$ROOT/build/test-classpath.txt")
asan_java() {
	LD_PRELOAD="$OUT/libasan-runtime.so" ASAN_OPTIONS=handle_segv=0:allow_user_segv_handler=1:detect_leaks=0 \
		java -Xcheck:jni -cp "${ASAN_CP:-$cp}" -Djava.library.path="$OUT" "$@"
}
if asan_java io.ibdxnet.sanitizer.AsanProbe >"$log/probe.txt" 2>&1 || ! grep -q 'heap-buffer-overflow' "$log/probe.txt"; then
	cat "$log/probe.txt" >&2
	echo "asan: the negative control was not reported — the sanitizer is not active in the JVM" >&2
	exit 1
fi
echo "negative control: $(grep -m1 'ERROR: AddressSanitizer' "$log/probe.txt" | sed 's/==[0-9]*==//')"
# JUnit classes $3… in a JVM over the instrumented library (classpath $2),
# output in $log/$1.txt: no sanitizer report, all passed, and — the JVM ran
# with -Xcheck:jni, whose warnings go straight to its output (Gradle's run
# does not keep them) — no JNI warning.
asan_junit() {
	local name=$1 classpath=$2
	shift 2
	ASAN_CP=$classpath asan_java org.junit.runner.JUnitCore "$@" 2>&1 | tee "$log/$name.txt" \
		| grep -v '^\s*at \|WARNING\|INFO\|^Nov\|^[A-Z][a-z][a-z] [0-9]' || true
	if grep -q 'ERROR: AddressSanitizer' "$log/$name.txt"; then
		grep -A30 'ERROR: AddressSanitizer' "$log/$name.txt" >&2
		echo "asan: sanitizer reports in the $name tests" >&2
		exit 1
	fi
	grep -q '^OK (' "$log/$name.txt" || { echo "asan: $name tests failed" >&2; exit 1; }
	if grep -E 'in native method|JNI local refs|WARNING: JNI' "$log/$name.txt" >&2; then
		echo "asan: -Xcheck:jni warnings in the $name tests" >&2
		exit 1
	fi
}
# Every test class that loads the native library (ib on sim, JNI natives, soaks).
asan_junit java "$cp" io.ibdxnet.DXNetDeliveryTest io.ibdxnet.DXNetRequestsTest io.ibdxnet.DXNetFlowControlTest \
	io.ibdxnet.DXNetConnectionsTest io.ibdxnet.DXNetConfigFileTest io.ibdxnet.DXNetConfigValidationTest \
	io.ibdxnet.DXNetConfigNativeKeysTest io.ibdxnet.DXNetConfigDocsTest io.ibdxnet.ib.NativeEngineTest io.ibdxnet.soak.SoakTest
# The drop-in's natives and call-backs (jni/compat): upstream's MsgrcJNIBinding
# against our own node in one JVM, over the same instrumented library.
[ "${IBDXNET_CLASSPATHS:-}" = ready ] || gradle --no-daemon -q compatClasspathFile
asan_junit compat "$(cat "$ROOT/build/compat-classpath.txt")" io.ibdxnet.compat.UpstreamBindingTest
echo "asan: 0 reports, 0 -Xcheck:jni warnings ($(awk '/^test result/ {n += $4} END {print n}' "$log/rust.txt") Rust tests, JNI tests $(grep '^OK (' "$log/java.txt"), compat $(grep '^OK (' "$log/compat.txt"))"
