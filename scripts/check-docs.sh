#!/usr/bin/env bash
# The documentation a newcomer reads stays readable and whole (issue 36): README.md at most 200
# lines, ARCHITECTURE.md at most 500 with its "Where to add" section, and every relative link
# resolves: each `](target)` in README.md, ARCHITECTURE.md and the Markdown files under docs/,
# bench/ and tests/ names a file or directory of the repository (its #fragment aside). Web links
# and in-page anchors are not checked. Run from anywhere; prints each problem and exits 1 if
# there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

broken=0
at_most() { # FILE LINES
    local n
    n=$(wc -l <"$1")
    if ((n > $2)); then
        echo "$1: $n lines, at most $2"
        broken=1
    fi
}
at_most README.md 200
at_most ARCHITECTURE.md 500
if ! grep -q '^## Where to add' ARCHITECTURE.md; then
    echo 'ARCHITECTURE.md: no "## Where to add" section'
    broken=1
fi

while IFS= read -r file; do
    dir=$(dirname "$file")
    # Link targets: what follows "](" up to ")"; a target has no spaces in these files.
    while IFS= read -r target; do
        case $target in
            http://* | https://* | mailto:* | '#'*) continue ;;
        esac
        path=${target%%#*}
        if [[ ! -e $dir/$path ]]; then
            echo "$file: broken link ($target)"
            broken=1
        fi
    done < <(grep -o '](\([^) ]*\))' "$file" | sed 's/^](\(.*\))$/\1/')
done < <(find README.md ARCHITECTURE.md docs bench tests -name '*.md' -not -path '*/target/*' | sort)

if [[ $broken == 1 ]]; then
    exit 1
fi
echo "documentation: README $(wc -l <README.md) lines, ARCHITECTURE $(wc -l <ARCHITECTURE.md), every link resolves"
