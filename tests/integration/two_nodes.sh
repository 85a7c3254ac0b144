#!/usr/bin/env bash
# Two nodes over a real network link on one machine (tests/integration/lib/two_nodes.sh: two
# network namespaces joined by a veth pair, 192.0.2.1 and 192.0.2.2): FSDP 4, HSDP 2x2 and
# TP 2 x FSDP 2 on 2 nodes x 2 ranks, each started by `xtrain launch --nnodes 2` and by real
# torchrun --nnodes 2, reproduce one process's per-step losses (1e-5 relative; compare_runs also
# holds gradient norms and final weights to 1e-5). Gloo's interface is the veth: by the route to
# MASTER_ADDR under xtrain launch, by GLOO_SOCKET_IFNAME under torchrun, and the start-up log
# names it. Prints the parity table and the interface lines. Needs root and iproute2's `ip`:
# without them it fails, it does not skip.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
source "$srcdir/tests/integration/lib/two_nodes.sh"
work=$(mktemp -d)
trap 'remove_nodes; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM  # through the EXIT trap: no namespace outlives the test
export TMPDIR=$work  # a failed launch keeps its error files under TMPDIR
make_nodes "xt$$"
write_recipe "$work/recipe.yaml" 8

train single 1
layouts=(
  "fsdp4|FSDP 4|"
  "hsdp2x2|HSDP 2x2|--set parallel.dp=2 --set parallel.fsdp=2"
  "tp2_fsdp2|TP 2 x FSDP 2|--set parallel.tp=2 --set parallel.fsdp=2"
)
table=$(printf '%-14s | %-8s | %-22s | %s' layout launcher "max loss difference" "MB across the link")
port=29500
for entry in "${layouts[@]}"; do
  IFS='|' read -r name layout flags <<< "$entry"
  for launcher in launch torchrun; do
    run=${name}_$launcher
    before=$(link_bytes)
    # shellcheck disable=SC2086  # flags: recipe overrides, split on purpose
    run_two_nodes "$run" "$launcher" "$port" $flags
    crossed=$(( $(link_bytes) - before ))
    port=$((port + 10))  # the next run's agent and store ports are not in TIME_WAIT
    comparison=$(compare_runs "$work/single" "$work/$run")
    difference=$(grep -o 'max loss difference [^ ]*' <<< "$comparison" | cut -d' ' -f4)
    # The job really ran over the link: FSDP's gathers alone move megabytes per step.
    (( crossed > 1000000 )) || fail "$run: only $crossed bytes crossed the link"
    table+=$'\n'$(printf '%-14s | %-8s | %-22s | %.1f' "$layout" "$launcher" "$difference" \
      "$(awk "BEGIN { print $crossed / 1e6 }")")
  done
done

# The start-up log names the interface, chosen by the route to the master or by the variable.
expect_text "$work/fsdp4_launch.node0.log" \
  "network: Gloo on interface ${node_if[0]} (192.0.2.1), the route to MASTER_ADDR 192.0.2.1"
expect_text "$work/fsdp4_torchrun.node0.log" "network: Gloo on interface ${node_if[0]}, from GLOO_SOCKET_IFNAME"
expect_text "$work/tp2_fsdp2_launch.node0.log" "placement on 2 nodes x 2 ranks:"
echo "$table"
grep -h -o 'network: .*' "$work/fsdp4_launch.node0.log" "$work/fsdp4_torchrun.node0.log"
