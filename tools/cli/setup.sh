# shellcheck shell=bash
# Sourced by ./ibdxnet: the prerequisites. Debian package lists and their
# installation (BUILD_PKGS, VM_PKGS), the Rust toolchain check, JDK 25
# (JDK25, IBDXNET_JDK25), and `setup` / `setup_build`.

# Build: bindgen + cmake for ibverbs-sys, the libibverbs link, cc for the header check,
# valgrind, Java 17 with Debian's Gradle 4.4 (no wrapper can be downloaded), gnuplot
# for the benchmark plots, objcopy (binutils) to split the jar's library from its debug info.
BUILD_PKGS=(gcc make cmake pkg-config libclang-dev libnl-3-dev libnl-route-3-dev libibverbs-dev ibverbs-providers rdma-core valgrind openjdk-17-jdk-headless gradle gnuplot-nox binutils)
# Soft-RoCE VM (tools/rxe-vm): qemu, a stock kernel with rdma_rxe, a static busybox,
# jq (cargo-test-in-vm.sh reads cargo's JSON).
VM_PKGS=(qemu-system-x86 linux-image-amd64 ibverbs-utils iproute2 busybox-static cpio kmod xz-utils perftest jq)

missing_packages() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
	done
}

ensure_packages() {
	local missing
	missing=$(missing_packages "$@" | tr '\n' ' ')
	[ -z "${missing// /}" ] && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "missing Debian packages; install them with:" >&2
		echo "  sudo apt-get install --no-install-recommends $missing" >&2
		exit 1
	fi
	say "installing Debian packages: $missing"
	# INITRD=No: the VM boots the kernel with its own tiny initramfs.
	# shellcheck disable=SC2086
	if ! INITRD=No DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing; then
		apt-get update -q
		# shellcheck disable=SC2086
		INITRD=No DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
	fi
}

ensure_rust() {
	if ! command -v cargo >/dev/null; then
		[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
	fi
	command -v cargo >/dev/null || {
		echo "cargo not found: install Rust with rustup (Debian's rustc is too old)" >&2
		exit 1
	}
	if command -v rustup >/dev/null; then
		rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
	fi
}

# JDK 25 for the FFM memory layer (compiled --release 22, tested and benchmarked
# on 25): Temurin 25 where these machines have it, or IBDXNET_JDK25=/path/to/jdk.
JDK25=${IBDXNET_JDK25:-/usr/lib/jvm/temurin-25-jdk-amd64}

ensure_jdk25() {
	[ -x "$JDK25/bin/javac" ] || {
		echo "JDK 25 not found at $JDK25 (the FFM memory layer is built and tested with it): install Temurin 25 or set IBDXNET_JDK25" >&2
		exit 1
	}
}

setup() {
	ensure_packages "${BUILD_PKGS[@]}" "${VM_PKGS[@]}"
	ensure_rust
}

# What building and running the Java stack needs (demo, loopback): no VM.
setup_build() {
	ensure_packages "${BUILD_PKGS[@]}"
	ensure_rust
}
