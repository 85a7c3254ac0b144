# `xtrain plan --hardware FILE` with figures that are not finite or not plausible, a based_on loop,
# and values of the wrong YAML type: each refused with exit 2 naming the file, the line and the key.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 10
# profile NAME FIELDS...: a profile based on h100-sxm with the fields given, one a line.
profile() {
  local name=$1
  shift
  { echo "based_on: h100-sxm"; echo "sources: [a test]"; printf '%s\n' "$@"; } > "$work/$name.yaml"
}
plan() { timeout 20 "$xtrain" plan "$work/recipe.yaml" --nodes 1 --gpus-per-node 2 --hardware "$work/$1.yaml"; }
# refused NAME TEXT: planning with profile NAME exits 2 with TEXT.
refused() {
  expect_refusal 2 "$work/$1.log" "$2" plan "$1"
  echo "$1: $(cat "$work/$1.log")"
}

profile memory_nan "memory_gib: .nan"
refused memory_nan "$work/memory_nan.yaml:3: 'memory_gib' is .nan; it must be a finite number of at least 0.001 and at most 100000 GiB"
profile memory_inf "memory_gib: .inf"
refused memory_inf "$work/memory_inf.yaml:3: 'memory_gib' is .inf; it must be a finite number"
profile efficiency_nan "gemm_efficiency: .nan"
refused efficiency_nan "$work/efficiency_nan.yaml:3: 'gemm_efficiency' is .nan; it must be a finite number above 0 and at most 1"
profile link_tiny "inter_node_gbs: 1e-300"
refused link_tiny "$work/link_tiny.yaml:3: 'inter_node_gbs' is 1e-300; it must be a finite number of at least 0.001 and at most 100000 GB/s"
profile latency_huge "collective_latency_ms: 1e30"
refused latency_huge "$work/latency_huge.yaml:3: 'collective_latency_ms' is 1e30"

# A file based on itself, and two based on each other: the loop is named, file by file.
printf 'based_on: %s\nsources: [a test]\n' "$work/itself.yaml" > "$work/itself.yaml"
refused itself "$work/itself.yaml:1: 'based_on: $work/itself.yaml' makes a loop of profiles: $work/itself.yaml -> $work/itself.yaml"
printf 'based_on: %s\nsources: [a test]\n' "$work/second.yaml" > "$work/first.yaml"
printf 'based_on: %s\nsources: [a test]\n' "$work/first.yaml" > "$work/second.yaml"
refused first "makes a loop of profiles: $work/first.yaml -> $work/second.yaml -> $work/first.yaml"

# YAML of the wrong shape: a scalar file, a mapping where a string or a number belongs.
echo "just a line" > "$work/scalar.yaml"
refused scalar "$work/scalar.yaml:1: a hardware profile is a mapping of fields"
profile name_map "name: {first: 1}"
refused name_map "$work/name_map.yaml:3: 'name' must be a string, got a mapping"
printf 'based_on: [h100-sxm]\nsources: [a test]\n' > "$work/based_list.yaml"
refused based_list "$work/based_list.yaml:1: 'based_on' must be a string, got a list"
printf 'based_on: h100-sxm\nsources: {a: b}\n' > "$work/sources_map.yaml"
refused sources_map "$work/sources_map.yaml:2: 'sources' must be a list of strings, got a mapping"
profile memory_map "memory_gib: {a: 1}"
refused memory_map "$work/memory_map.yaml:3: 'memory_gib' must be a number, got a mapping"

# A mistyped field is not silently replaced by the base profile's figure.
profile typo "memory_gb: 40"
refused typo "$work/typo.yaml:3: unknown field 'memory_gb' (did you mean memory_gib?)"

# A plausible variant still plans.
profile fine "memory_gib: 40"
expect_exit 0 "$work/fine.log" plan fine
expect_text "$work/fine.log" "40"
