# shellcheck shell=bash
# Sourced by ./ibdxnet: `publish` (the Maven publication into ~/.m2 or a
# directory) and `release VERSION NEXT` (date, tag, open the next version).

# The Maven publication into ~/.m2 (publishToMavenLocal) or, given DIR, into that
# directory (Gradle's local-repository location, -Dmaven.repo.local; Debian's
# Gradle 4.4 cannot deploy to a file:// repository).
publish() {
	local dir=${1:-}
	if [ -n "$dir" ]; then
		mkdir -p "$dir"
		dir=$(cd "$dir" && pwd)
		gradle --no-daemon -q -Dmaven.repo.local="$dir" -Pjdk25Home="$JDK25" publishToMavenLocal
	else
		gradle --no-daemon -q -Pjdk25Home="$JDK25" publishToMavenLocal
		dir="$HOME/.m2/repository"
	fi
	echo "published io.ibdxnet:ibdxnet:$(sed -n 's/^version=//p' "$ROOT/gradle.properties") to $dir"
}

# A release: `release VERSION NEXT`. VERSION must be gradle.properties' version
# with CHANGELOG.md's top section "## VERSION (unreleased)" and its API recorded
# (java/api/VERSION.api); the section gets today's date and the commit is
# tagged vVERSION. Then NEXT is opened: the version everywhere (gradle.properties,
# the crate, Cargo.lock, examples/, the documents), its API record (a copy:
# nothing changed yet) and "## NEXT (unreleased)".
release() {
	local version=${1:-} next=${2:-} semver='^[0-9]+\.[0-9]+\.[0-9]+$' current date
	[[ "$version" =~ $semver && "$next" =~ $semver ]] || { echo "usage: ./ibdxnet release VERSION NEXT (e.g. 0.2.0 0.3.0)" >&2; exit 2; }
	current=$(sed -n 's/^version=//p' "$ROOT/gradle.properties")
	[ "$version" = "$current" ] || { echo "release: gradle.properties says $current, not $version" >&2; exit 1; }
	[ "$(printf '%s\n%s\n' "$version" "$next" | sort -V | tail -1)" = "$next" ] && [ "$next" != "$version" ] ||
		{ echo "release: $next does not come after $version" >&2; exit 1; }
	[ -z "$(git -C "$ROOT" status --porcelain)" ] || { echo "release: the working tree is not clean" >&2; exit 1; }
	git -C "$ROOT" rev-parse -q --verify "refs/tags/v$version" >/dev/null && { echo "release: tag v$version exists" >&2; exit 1; }
	grep -qx "## $version (unreleased)" "$ROOT/CHANGELOG.md" &&
		[ "$(grep -m1 '^## ' "$ROOT/CHANGELOG.md")" = "## $version (unreleased)" ] ||
		{ echo "release: CHANGELOG.md's first section is not \"## $version (unreleased)\"" >&2; exit 1; }
	[ -f "$ROOT/java/api/$version.api" ] || { echo "release: java/api/$version.api is missing" >&2; exit 1; }
	date=$(date -u +%Y-%m-%d)
	sed -i "s/^## $version (unreleased)\$/## $version — $date/" "$ROOT/CHANGELOG.md"
	git -C "$ROOT" commit -qam "Release $version" && git -C "$ROOT" tag -a "v$version" -m "ibdxnet $version ($date)" || exit 1
	sed -i "s/^version=$version\$/version=$next/" "$ROOT/gradle.properties"
	sed -i "0,/^version = \"$version\"\$/s//version = \"$next\"/" "$ROOT/native/ibdxnet/Cargo.toml"
	# The documents name the version a build of main is (ReadmeExamplesTest holds
	# them to gradle.properties): the coordinates, jar names, the version the library reports.
	{ grep -rlF "$version" "$ROOT/examples/build.gradle" "$ROOT"/*.md "$ROOT/docs" 2>/dev/null || true; } | grep -v CHANGELOG.md | xargs -r sed -i \
		-e "s/io\.ibdxnet:ibdxnet:$version/io.ibdxnet:ibdxnet:$next/g" -e "s/ibdxnet-$version\([.-]\)/ibdxnet-$next\1/g" \
		-e "s/<version>$version</<version>$next</g" -e "s/\`$version abi /\`$next abi /g"
	(cd "$ROOT" && cargo update --workspace --offline -q) || exit 1
	cp "$ROOT/java/api/$version.api" "$ROOT/java/api/$next.api"
	sed -i "1s/ $version / $next /" "$ROOT/java/api/$next.api"
	awk -v n="$next" '!done && /^## / { print "## " n " (unreleased)\n"; done = 1 } { print }' "$ROOT/CHANGELOG.md" > "$ROOT/CHANGELOG.md.new" &&
		mv "$ROOT/CHANGELOG.md.new" "$ROOT/CHANGELOG.md"
	git -C "$ROOT" add java/api/"$next.api" && git -C "$ROOT" commit -qam "Open $next" || exit 1
	echo "released $version (tag v$version, $date); main is at $next (unreleased). Push with: git push origin main v$version"
}
