#!/usr/bin/env bash
# newcomer.sh - issue 30's "first message of your own within 10 minutes",
# timed: the README's and docs/getting-started.md's commands, word by word,
# from a fresh clone with nothing built and nothing cached by this project:
# an empty cargo home (every crate downloaded from crates.io) and an empty
# Gradle user home. The Debian packages the launcher would install are
# taken as present (on a fresh machine apt-get adds their download and
# install time); Rust comes from the machine's rustup; and ~/.m2 is the
# machine's: HOME is new, but Java takes user.home from the password
# database, so `./ibdxnet publish` writes into the user's own ~/.m2.
#
#   bench/newcomer.sh [WORKDIR]     (default: a new temporary directory)
#
# Steps, each timed: clone; ./ibdxnet demo (builds library and jar, runs the
# demo); ./ibdxnet publish; the "own" program: examples/ copied into a new
# project whose sender is changed to send its own message text, built with
# Debian's Gradle 4.4 as getting-started.md shows, run over nio and ib.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
W=${1:-$(mktemp -d /tmp/newcomer.XXXXXX)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
[ ! -e "$W/ibdxnet" ] || { echo "newcomer: $W/ibdxnet exists" >&2; exit 2; }
mkdir -p "$W/home" "$W/cargo"
# A new HOME (no ~/.gradle, no ~/.cargo); rustup's toolchains stay where they are.
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export PATH="$HOME/.cargo/bin:$PATH"
export HOME=$W/home CARGO_HOME=$W/cargo GRADLE_USER_HOME=$W/home/.gradle
T0=$SECONDS
step() { echo "== [$((SECONDS - T0)) s] $*"; }

echo "newcomer: $(date -u +%FT%TZ), $(nproc) cores, uptime: $(uptime)"
echo "newcomer: commit $(git -C "$ROOT" rev-parse --short HEAD), work dir $W"
step "git clone"
git clone -q "$ROOT" "$W/ibdxnet"
cd "$W/ibdxnet"
step "./ibdxnet demo (README, 'The two commands')"
./ibdxnet demo
step "./ibdxnet publish (README, 'Hello'; getting-started.md step 2)"
./ibdxnet publish
step "an own project: examples/ copied, its events' sender says something of its own"
cp -r examples "$W/myapp"
rm -rf "$W/myapp/build" "$W/myapp/.gradle"
sed -i 's|System.out.println("node " + server + " received all "|System.out.println("hello from a newcomer: node " + server + " received all "|' \
	"$W/myapp/src/main/java/example/Example.java"
grep -q 'hello from a newcomer' "$W/myapp/src/main/java/example/Example.java"
cd "$W/myapp"
step "gradle -q installDist (getting-started.md, Gradle 4.4)"
gradle -q installDist
step "run it over nio and ib (getting-started.md)"
java --enable-native-access=ALL-UNNAMED -cp 'build/install/ibdxnet-example/lib/*' example.Example nio
java --enable-native-access=ALL-UNNAMED -cp 'build/install/ibdxnet-example/lib/*' example.Example ib
step "done: a first message of one's own, $((SECONDS - T0)) s after the clone began"
