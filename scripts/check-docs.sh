#!/usr/bin/env bash
# README.md as a front door, and nothing lost on the way to docs/: prints README.md's length, and fails when it is over
# 450 lines, when a `## ` or `### ` heading that README.md had at BASE (80cab00, before the split) is neither in it
# nor a heading of some docs/*.md, or when the committed plots under docs/images/ are not what scripts/plot.py draws
# from docs/data/. It also counts the README's lines at BASE found again word for word (headings at any level, links
# to any target) and lists, with -v, those that were edited on the way.
#
#   scripts/check-docs.sh [-v] [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."

verbose=0
if [ "${1:-}" = -v ]; then verbose=1; shift; fi
base=${1:-80cab00}
limit=450
failed=0

lines=$(wc -l < README.md)
echo "README.md: $lines lines (at most $limit)"
[ "$lines" -le "$limit" ] || { echo "FAIL: README.md is over $limit lines"; failed=1; }

old=$(mktemp)
plots=$(mktemp -d)
trap 'rm -rf "$old" "$plots"' EXIT
git show "$base:README.md" > "$old"

# Headings: the text after the #s, wherever it now stands.
headings() { sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$@"; }
moved=0
while IFS= read -r heading; do
    if headings README.md | grep -qxF -- "$heading"; then continue; fi
    pages=$(grep -lxE -- "#{1,6} $(printf '%s' "$heading" | sed 's/[][\.*^$+?(){}|/]/\\&/g')" docs/*.md || true)
    if [ -z "$pages" ]; then
        echo "FAIL: \"$heading\" left README.md and is a heading of no docs/*.md"
        failed=1
    else
        echo "moved: $heading -> $(echo $pages)"
        moved=$((moved + 1))
    fi
done < <(sed -n 's/^#\{2,3\} \(.*\)$/\1/p' "$old")
echo "$moved headings of README.md at $base are now in docs/"

# Every non-blank line of the README at BASE, found again in README.md or docs/*.md (headings and link targets aside).
python3 - "$old" "$verbose" <<'EOF'
import glob, re, sys
normal = lambda line: re.sub(r"\]\([^)]*\)", "]()", re.sub(r"^#{1,6} ", "# ", line))
now = {normal(line) for path in ["README.md"] + sorted(glob.glob("docs/*.md")) for line in open(path, encoding="utf-8").read().split("\n")}
old = [line for line in open(sys.argv[1], encoding="utf-8").read().split("\n") if line.strip()]
edited = [line for line in old if normal(line) not in now]
print(f"{len(old) - len(edited)} of the {len(old)} non-blank lines found again word for word; {len(edited)} edited"
      + (" (-v lists them)" if edited and sys.argv[2] == "0" else ""))
if sys.argv[2] == "1":
    for line in edited:
        print(f"  edited: {line}")
EOF

python3 scripts/plot.py --out "$plots" > /dev/null
for svg in "$plots"/*.svg; do
    if ! cmp -s "$svg" "docs/images/$(basename "$svg")"; then
        echo "FAIL: docs/images/$(basename "$svg") is not what scripts/plot.py draws from docs/data/ (run scripts/plot.py)"
        failed=1
    fi
done
echo "plots: $(ls "$plots" | wc -l) in docs/images/ drawn from docs/data/"

exit "$failed"
