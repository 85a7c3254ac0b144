#!/usr/bin/env bash
# Elastic `xtrain launch` over real network links on one machine: three network namespaces
# (192.0.2.1-3, TEST-NET-1, no route anywhere else) joined by veth pairs to a bridge in a fourth.
#   spare:  --nnodes 2:3 --active-nodes 2, one rank a node: nodes 0 and 1 train, node 2 waits as
#           a hot spare. Every process of node 1 (launcher and rank) is killed with SIGKILL after
#           step 12; node 0's launcher names node 1 lost from its missed heartbeats, node 2 takes
#           its place, and the run resumes from its checkpoint at the same world size. Its per-step
#           losses equal an uninterrupted run's bit for bit. Prints the time from the kill to the
#           next new step: detection, restart, reload, recomputed steps; `xtrain goodput`
#           reads the interruption back from the run's own records.
#   shrink: --nnodes 1:2, no spare: node 1 is killed after step 12 and the run resumes on node 0
#           alone, the global batch kept by twice the accumulation; losses within 1e-5 relative.
#   grow:   as shrink, then node 1's launcher is started again with the same command: it joins
#           the attempt running on node 0, whose ranks stop after their next periodic checkpoint,
#           and the next attempt runs on both nodes from it; losses within 1e-5 relative.
# In each run, `xtrain goodput` checks the data position every step recorded: steps 1..24 read
# samples 0..191 once, in order, across the restarts; a copy of the spare run's records with one
# resumed step moved to other samples is refused (exit 1), naming the step and the samples.
# Needs root and iproute2's `ip`: without them it fails, it does not skip.
# KEEP=1 keeps its folder (the nodes' logs, the runs) for a look afterwards.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
source "$srcdir/tests/integration/lib/bridged_nodes.sh"
bridged_session "xe$$" 3

write_recipe "$work/recipe.yaml" 24
sed -i 's/log_every: 5/log_every: 1/' "$work/recipe.yaml"

train reference 2

# --- a hot spare takes the place of a lost node -------------------------------------------------
port=29500
start_with_spare spare
wait_for "$work/spare.node0.log" "\[rank 0\]: step +12/" 40
killed=$(kill_node 1)
wait_all || { tail -n 30 "$work"/spare.node*.log; fail "the job did not survive the loss of node 1"; }
log0=$work/spare.node0.log
expect_match "$log0" "launch: node 1 lost: no heartbeat for"
expect_match "$log0" "attempt 1 runs on nodes 0,2 (2 ranks)"
expect_match "$work/spare.node2.log" "attempt 1 runs on nodes 0,2 (2 ranks); this node is group rank 1"
expect_match "$log0" "resumed from .* at step "

same_losses "$work/reference" "$work/spare" 24 0 spare

# The time from the kill to the first step beyond those done before it, in four parts.
last_step=$(awk -v k="$killed" '$1 < k && match($0, /\[rank 0\]: step +[0-9]+\//) {
  s = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", s); s = substr(s, 2); last = s + 0 } END { print last }' "$log0")
# The step running at the kill can still end (node 1 had sent its last gradients; rank 0's line
# then reaches the log after the kill): the run's records (the first session's event file, read
# by `xtrain goodput`) say which step the first session ended on.
"$xtrain" goodput "$work/spare" > "$work/goodput.txt"
recorded_last=$(grep -o '(after step [0-9]*, resumed' "$work/goodput.txt" | grep -o '[0-9]*' || true)
[[ $recorded_last == "$last_step" || $recorded_last == $((last_step + 1)) ]] ||
  { cat "$work/goodput.txt"; fail "the first session's records end at step '$recorded_last'; the log had step $last_step before the kill"; }
last_step=$recorded_last
heartbeat=$(first_time "$log0" "launch: node 1 lost" "$killed")
detected=$(first_time "$log0" "(\\[rank 0\\]|launch: node 1 lost)" "$killed")
restarted=$(first_time "$log0" "attempt 1 runs on nodes" "$killed")
reloaded=$(first_time "$log0" "resumed from" "$killed")
next_step=$(first_time "$log0" "\\[rank 0\\]: step +$((last_step + 1))/" "$restarted")
resumed_at=$(grep -o 'resumed from .* at step [0-9]*' "$log0" | grep -o '[0-9]*$')
awk -v k="$killed" -v h="$heartbeat" -v d="$detected" -v r="$restarted" -v l="$reloaded" -v n="$next_step" \
  -v last="$last_step" -v from="$resumed_at" 'BEGIN {
  printf "kill of node 1 after step %d to the next new step (%d): %.2f s\n", last, last + 1, n - k
  printf "  detection   %.2f s  (the first of: rank 0 failing on its dead peer; node 0 naming node 1 lost, at %.2f s)\n", d - k, h - k
  printf "  restart     %.2f s  (the survivors stopped, nodes 0 and 2 met for attempt 1)\n", r - d
  printf "  reload      %.2f s  (ranks started, joined, read the step-%d checkpoint)\n", l - r, from
  printf "  recomputed  %.2f s  (steps %d to %d again, then %d)\n", n - l, from + 1, last, last + 1
}'
(( $(awk -v h="$heartbeat" -v k="$killed" 'BEGIN { print (h - k <= 3 * 0.5 + 0.5) }') )) ||
  fail "node 1 was named lost $(awk -v h="$heartbeat" -v k="$killed" 'BEGIN { print h - k }') s after the kill, beyond 3 heartbeats + 0.5 s"

# The run's own records tell the same story: 2 sessions, the interruption after the last step
# before the kill, resumed from the checkpoint, costing more than the restart alone and not
# more than the kill to the next new step (plus the step that was running at the kill).
cat "$work/goodput.txt"
expect_text "$work/goodput.txt" "24 steps in 2 sessions, 1 interruptions"
expect_text "$work/goodput.txt" "(after step $last_step, resumed from step $resumed_at:"
lost=$(grep -o 'interruption 1 *[0-9.]*' "$work/goodput.txt" | awk '{ print $3 }')
(( $(awk -v lost="$lost" -v k="$killed" -v n="$next_step" 'BEGIN { print (lost > 1 && lost < n - k + 1) }') )) ||
  fail "goodput counts $lost s for the interruption; the kill to the next new step took $(awk -v k="$killed" -v n="$next_step" 'BEGIN { print n - k }') s"
expect_refusal 2 "$work/goodput_missing.txt" "goodput: cannot read $work/none/metrics.jsonl" "$xtrain" goodput "$work/none"
whole_data="data: steps 1..24 read samples 0..191 in order, each global batch once: none skipped or repeated"
expect_text "$work/goodput.txt" "$whole_data"
# The first step after the restart as if the resume had restored the wrong data position.
cp -r "$work/spare" "$work/doctored"
first=$((resumed_at + 1))
sed -i "s/^{\"step\":$first,\(.*\)\"data.position\":$((resumed_at * 8)),/{\"step\":$first,\1\"data.position\":$((first * 8)),/" \
  "$work/doctored/metrics.jsonl"
expect_refusal 1 "$work/goodput_doctored.txt" \
  "step $first read samples $((first * 8))..$((first * 8 + 7)): samples $((resumed_at * 8))..$((first * 8 - 1)) after step $resumed_at's batch were skipped" \
  "$xtrain" goodput "$work/doctored"

# --- no spare: the run goes on, on the node left ----------------------------------------------------
port=29600  # node 0's ports of the first job may still be in TIME_WAIT
start_node shrink 0 1:2
start_node shrink 1 1:2
wait_for "$work/shrink.node0.log" "\[rank 0\]: step +12/" 40
kill_node 1 > /dev/null
wait_all || { tail -n 30 "$work"/shrink.node*.log; fail "the job did not go on without node 1"; }
expect_match "$work/shrink.node0.log" "attempt 1 runs on nodes 0 (1 ranks)"
expect_match "$work/shrink.node0.log" "train: 24 steps x 8 sequences (8 per rank: 4 micro batches of 2)"
same_losses "$work/reference" "$work/shrink" 24 1e-5 "shrink (the last steps on 1 node of 1 rank)"
"$xtrain" goodput "$work/shrink" > "$work/shrink_goodput.txt"
expect_text "$work/shrink_goodput.txt" "$whole_data"

# --- no spare, then the lost node back: the job grows back at the next checkpoint ---------------
port=29700
start_node grow 0 1:2
start_node grow 1 1:2
wait_for "$work/grow.node0.log" "\[rank 0\]: step +12/" 40
kill_node 1 > /dev/null
wait_for "$work/grow.node0.log" "attempt 1 runs on nodes 0 \(1 ranks\)" 20
# Node 0's rank is held (SIGSTOP) until node 0's launcher has seen node 1 back: its steps here
# take 10 ms, and would end the run before a launcher has started (1 s).
rank_pattern="^$xtrain train $work/recipe.yaml --set run.dir=$work/grow\$"
for _ in {1..100}; do
  held=$(pgrep -f -- "$rank_pattern" || true)
  [[ -z $held ]] || break
  sleep 0.05
done
[[ -n $held ]] || fail "node 0's rank of attempt 1 did not start"
kill -STOP $held
mv "$work/grow.node1.log" "$work/grow.lost_node1.log"
start_node grow 1 1:2  # the same command again
wait_for "$work/grow.node0.log" "launch: node 1 joined attempt 1" 20
kill -CONT $held
wait_all || { tail -n 30 "$work"/grow.node*.log; fail "the job did not grow back to 2 nodes"; }
log0=$work/grow.node0.log
expect_match "$log0" "launch: node 1 beats again"
expect_match "$log0" "launch: node 1 joined attempt 1 on 1 of 2 nodes: the ranks stop after their next checkpoint"
expect_match "$work/grow.node1.log" "attempt 1 runs on nodes 0 (1 ranks); this node waits as a spare"
regrouped_at=$(grep -o 'regrouping after step [0-9]*' "$log0" | grep -o '[0-9]*$' || true)
[[ -n $regrouped_at ]] && ((regrouped_at % 5 == 0 && regrouped_at < 24)) ||
  { tail -n 30 "$log0"; fail "no regroup at a checkpoint before the last step (checkpoint.every 5)"; }
expect_match "$log0" "attempt 1 stopped at its checkpoint to take in the nodes that joined"
expect_match "$work/grow.node1.log" "attempt 2 runs on nodes 0,1 (2 ranks); this node is group rank 1"
expect_match "$log0" "resumed from .* at step $regrouped_at"
[[ $(grep -c "train: 24 steps x 8 sequences (4 per rank: 2 micro batches of 2)" "$log0") == 2 ]] ||
  fail "attempts 0 and 2 should both run 2 ranks"
same_losses "$work/reference" "$work/grow" 24 1e-5 "grow (steps $((regrouped_at + 1))..24 on 2 nodes again)"
"$xtrain" goodput "$work/grow" > "$work/grow_goodput.txt"
cat "$work/grow_goodput.txt"
expect_text "$work/grow_goodput.txt" "24 steps in 3 sessions, 2 interruptions"
expect_text "$work/grow_goodput.txt" "$whole_data"
