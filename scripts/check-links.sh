#!/usr/bin/env bash
# Every relative link of the documentation resolves: each `](target)` in README.md,
# ARCHITECTURE.md and the Markdown files under docs/, bench/ and tests/ names a file or directory
# of the repository (its #fragment aside). Web links and in-page anchors are not checked. Run from
# anywhere; prints each broken link and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

broken=0
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
echo "documentation links: all resolve"
