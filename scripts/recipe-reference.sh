#!/usr/bin/env bash
# Writes the recipe reference of docs/recipes.md, between its recipe-reference markers, from the
# option registry as the built binary prints it (`xtrain options`). The unit test "the recipe
# reference is generated from the registry" fails while the two differ.
#   scripts/recipe-reference.sh [XTRAIN]   (default build/xtrain)
set -euo pipefail
cd "$(dirname "$0")/.."
xtrain=${1:-build/xtrain}
doc=docs/recipes.md
begin='<!-- recipe-reference:begin (xtrain options) -->'
end='<!-- recipe-reference:end -->'
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || { echo "$doc: the recipe-reference markers are missing" >&2; exit 2; }
table=$(mktemp)
out=$(mktemp)
trap 'rm -f "$table" "$out"' EXIT
"$xtrain" options > "$table"
awk -v begin="$begin" -v end="$end" -v table="$table" '
  $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$doc" > "$out"
if cmp -s "$out" "$doc"; then echo "$doc: the recipe reference is current"; else cat "$out" > "$doc"; echo "$doc: the recipe reference rewritten"; fi
