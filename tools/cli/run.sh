# shellcheck shell=bash
# Sourced by ./ibdxnet: the commands that run the product directly, `demo`
# (two DXNet nodes with a report) and `loopback` (the native benchmark).

demo() {
	setup_build
	# The main job: two DXNet nodes exchange messages and requests (Java over
	# the native engine; sim when there is no RDMA device), with a report.
	# Plain `java` (not a Gradle task), so two demo processes can run at once.
	gradle --no-daemon -q mainClasspathFile
	java -cp "$(cat "$ROOT/build/main-classpath.txt")" -Djava.library.path="$ROOT/target/release" \
		io.ibdxnet.app.DemoMain "$@"
}

loopback() {
	setup_build
	cargo build --release --locked -q -p ibdxnet --bin ibdxnet-loopback
	"$ROOT/target/release/ibdxnet-loopback" "$@"
}
