#!/usr/bin/env bash
# How late a fresh JVM's first request timeout is against its later ones
# (io.ibdxnet.bench.FirstTimeout): JVMS fresh JVMs per transport, 5 requests
# each that time out after 100 ms. PREFIX_CP, if set, goes before the bench
# classpath (an A/B against other classes). Needs `gradle benchClasspathFile`.
# Usage: bench/first-timeout.sh [JVMS=5] [JAVA=java]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
jvms=${1:-5}
java=${2:-java}
cp="$(cat "$ROOT/build/bench-classpath.txt")"
[ -n "${PREFIX_CP:-}" ] && cp="$PREFIX_CP:$cp"
echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $java: $("$java" -version 2>&1 | head -1)"
for t in nio ib loopback; do
	for _ in $(seq "$jvms"); do
		"$java" -cp "$cp" -Djava.library.path="$ROOT/target/release" io.ibdxnet.bench.FirstTimeout "$t" 2>/dev/null |
			grep '^first-timeout'
	done
done
