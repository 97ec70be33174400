#!/bin/bash
# cargo-test-in-vm.sh - build the test binaries of `cargo test CARGO_ARGS` on
# the host, then run every one of them inside ONE Soft-RoCE VM
# (run-in-rxe-vm.sh), one after another, each in its package's directory as
# cargo runs them. Same tests as run-in-rxe-vm.sh as cargo's target runner,
# but one VM boot instead of one per test binary (a boot is 6 s on an idle
# host and 20 s on a loaded one; the workspace has 14 test binaries).
# Doc tests are not run (they run on the host; cargo has no runner for them).
#
# Usage: cargo-test-in-vm.sh [-t SECONDS] [-e NAME=VALUE]... [--] CARGO_ARGS... [-- TEST_ARGS...]
#   -t, -e    as for run-in-rxe-vm.sh (time limit for all binaries together,
#             environment of every test binary)
#   e.g. cargo-test-in-vm.sh -e IBDXNET_REQUIRE_RDMA=1 -- --release --locked --workspace -- --test-threads=1
#
# Exit code: 0 if every test binary passed, 1 if any failed (each failed
# binary is named at the end), 101 if the build failed, run-in-rxe-vm.sh's
# 124 (time limit) or 125 (VM or rxe set-up failure).
#
# Internal: `cargo-test-in-vm.sh --in-vm LIST [TEST_ARGS...]` is what runs
# inside the VM; LIST has one "package-dir<TAB>executable" line per binary.
# Needs jq (reads cargo's JSON messages).

set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ "${1:-}" = --in-vm ]; then
	# Progress and summary on stdout, in order with the tests' own output
	# (the VM's stdout and stderr are separate serial ports).
	list=$2; shift 2
	failed=()
	while IFS=$'\t' read -r dir exe; do
		echo "     Running $exe (in the VM)"
		(cd "$dir" && "$exe" "$@" </dev/null) || failed+=("$exe (exit $?)")
	done < "$list"
	if [ ${#failed[@]} -gt 0 ]; then
		echo "cargo-test-in-vm: ${#failed[@]} test binaries failed:"
		printf '    %s\n' "${failed[@]}"
		exit 1
	fi
	echo "cargo-test-in-vm: every test binary passed"
	exit 0
fi

declare -a vm_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	-t|-e) vm_args+=("$1" "$2"); shift 2 ;;
	--) shift; break ;;
	-h|--help) sed -n '2,22p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
declare -a cargo_args=() test_args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cargo_args+=("$1"); shift; done
[ $# -gt 0 ] && { shift; test_args=("$@"); }
command -v jq >/dev/null || { echo "cargo-test-in-vm: jq is missing (apt-get install jq)" >&2; exit 125; }

# The list lives in the target directory: the VM sees the host's files.
target=$(cargo metadata --format-version 1 --no-deps 2>/dev/null | jq -r .target_directory) || target=""
[ -n "$target" ] && [ -d "$target" ] || target=${CARGO_TARGET_DIR:-$PWD/target}
mkdir -p "$target"
list=$(mktemp "$target/vm-test-binaries.XXXXXX") || exit 125
trap 'rm -f "$list"' EXIT

json=$(cargo test --no-run --message-format=json-render-diagnostics ${cargo_args[@]+"${cargo_args[@]}"}) || exit 101
jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
	| [(.manifest_path | sub("/[^/]*$"; "")), .executable] | @tsv' <<< "$json" > "$list"
[ -s "$list" ] || { echo "cargo-test-in-vm: cargo built no test binary" >&2; exit 101; }
echo "cargo-test-in-vm: $(wc -l < "$list") test binaries, one VM" >&2
"$here/run-in-rxe-vm.sh" ${vm_args[@]+"${vm_args[@]}"} -- "$here/cargo-test-in-vm.sh" --in-vm "$list" \
	${test_args[@]+"${test_args[@]}"}
