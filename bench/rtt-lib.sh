# Sourced by bench/rtt-hops.sh and bench/rtt-waiting.sh: the JVM line, the
# results header (machine, commit, load) and one row of RTT figures.
# Needs ROOT; the bench classpath (gradle benchClasspathFile) and target/release.
CP=$(cat "$ROOT/build/bench-classpath.txt")
jvm=(java -Xms1g -Xmx1g -cp "$CP" -Djava.library.path="$ROOT/target/release")

rtt_header() { # TITLE
	echo "# $1, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "# machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(java -version 2>&1 | head -1)"
	echo "# git: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# One run of MAIN_CLASS ARGS...; prints NAME and the RESULT line's CPU per
# message and RTT p50/p99 (FAILED without a RESULT line).
rtt_row() { # WIDTH NAME JVM_ARGS_AND_MAIN...
	local width=$1 name=$2 line
	shift 2
	line=$("${jvm[@]}" "$@" 2>/dev/null | grep '^RESULT ') || line="FAILED"
	printf "%-${width}s %s\n" "$name" "$(echo "$line" | tr ' ' '\n' | grep -E '^(cpu_ns_per_msg|rtt_p50_us|rtt_p99_us)=' | paste -sd' ')"
}
