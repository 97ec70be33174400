#!/bin/bash
# Two upstream DXNetMain JVMs (unchanged) over our libibdxnet.so on an RDMA
# device of this host: node 1 receives, node 0 sends COUNT messages of SIZE
# bytes; the control plane on 127.0.0.1 / 127.0.0.2 (IBDXNET_COMPAT_LISTEN),
# both JVMs on the same device. Meant for the Soft-RoCE VM:
#
#   gradle upstreamClasspathFile cargoBuild
#   tools/rxe-vm/run-in-rxe-vm.sh -t 900 compat/upstream/dxnetmain-ib.sh [COUNT [SIZE]]
#
# Exit 0 when both print their results with every message counted.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COUNT=${1:-2000}
SIZE=${2:-64}
CP=$(cat "$ROOT/build/upstream-classpath.txt") || { echo "run: gradle upstreamClasspathFile" >&2; exit 2; }
work=$(mktemp -d)
mkdir "$work/jni"
cp "$ROOT/target/release/libibdxnet.so" "$work/jni/"
cp "$ROOT/compat/upstream/dxnetmain-ib.json" "$work/config.json"
cd "$work" || exit 2
# TCG's -cpu max advertises AVX levels it does not emulate faithfully (see tools/rxe-vm/java-in-vm.sh).
[ "${RXE_VM:-}" = 1 ] && export JAVA_TOOL_OPTIONS="-XX:UseAVX=0"
J=(java -Xcheck:jni --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
	"-Dlog4j.configurationFile=file:$ROOT/compat/upstream/log4j2.xml" -cp "$CP" de.hhu.bsinfo.dxnet.DXNetMain config.json 5000 1)
export IBDXNET_FABRIC=verbs RUST_LOG=${RUST_LOG:-warn}
IBDXNET_COMPAT_LISTEN=127.0.0.2 "${J[@]}" 0 "$COUNT" "$SIZE" 1 1 > receiver.log 2>&1 &
receiver=$!
IBDXNET_COMPAT_LISTEN=127.0.0.1 "${J[@]}" "$COUNT" 0 "$SIZE" 1 0 1 > sender.log 2>&1
s=$?
wait $receiver
r=$?
for f in sender receiver; do
	echo "== $f"
	grep -E "RESULTS (SEND|RECV)|ERROR|WARN|Exception|WARNING in native" "$f.log" | head -20
done
ok=0
grep -q "RESULTS SEND: .*Msgs=$COUNT," sender.log || ok=1
grep -q "RESULTS RECV: .*Msgs=$COUNT," receiver.log || ok=1
grep -q "WARNING in native method" sender.log receiver.log && ok=1
echo "sender exit $s, receiver exit $r, results $([ $ok = 0 ] && echo complete || echo INCOMPLETE)"
[ $s = 0 ] && [ $r = 0 ] && exit $ok
exit 1
