#!/usr/bin/env bash
# A choice's enum and its table of names cannot drift apart (util/choice.h): for every enum of
# every choice header, a copy of the header with one more enumerator must fail to compile,
# naming that enumerator, while the header as it is compiles cleanly.
#   stale_choices.sh CXX SRCDIR
set -euo pipefail
cxx=$1
srcdir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe=stale_choice_probe
compile() { "$cxx" -std=c++17 -fsyntax-only -I"$work/include" -I"$srcdir/lib" -x c++ - <<< "#include \"$1\""; }

headers=$(cd "$srcdir/lib" && grep -l '^XTRAIN_CHOICES_BEGIN' -r . | sed 's|^\./||' | sort)
[[ -n $headers ]] || { echo "FAIL: no choice headers under $srcdir/lib"; exit 1; }
checked=0
for header in $headers; do
  compile "$header" || { echo "FAIL: $header does not compile as it is"; exit 1; }
  for enum in $(grep -oE '^enum class [A-Za-z_][A-Za-z0-9_]*' "$srcdir/lib/$header" | awk '{print $3}'); do
    mkdir -p "$work/include/$(dirname "$header")"
    sed -E "s/^(enum class $enum \{[^}]*)\}/\1, $probe }/" "$srcdir/lib/$header" > "$work/include/$header"
    grep -q "enum class $enum {.*$probe" "$work/include/$header" || { echo "FAIL: cannot extend $enum in $header"; exit 1; }
    if errors=$(compile "$header" 2>&1); then
      echo "FAIL: $header: $enum with an enumerator missing from its table still compiles"; exit 1
    fi
    grep -qE "$probe.* not handled in switch" <<< "$errors" || { echo "FAIL: $header: $enum: $errors"; exit 1; }
    rm "$work/include/$header"
    checked=$((checked + 1))
  done
done
echo "stale_choices: $checked enums in $(wc -w <<< "$headers") headers; an enumerator without a name fails to compile in each"
