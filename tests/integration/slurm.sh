#!/usr/bin/env bash
# scripts/slurm/train.sbatch on a real one-node SLURM (scripts/slurm/local-cluster.sh: munge,
# slurmctld and slurmd from Debian's packages, state in a scratch folder):
#  1. a 2-task FSDP job gives `xtrain launch`'s per-step losses, bit for bit;
#  2. 3 USR1 preemptions, each requeued by the script and resumed, end with the uninterrupted
#     run's losses, and the job's log keeps every attempt (--open-mode=append);
#  3. a stop where one rank exits 0.3 s after the other still requeues (no --kill-on-bad-exit);
#  4. kill -9 of a task ends the job non-zero within 10 s, without a requeue; with
#     XTRAIN_RESTARTS=1 the script runs the step again instead, which resumes from its checkpoint
#     and ends with the uninterrupted run's losses;
#  5. a bad recipe ends the job with exit 2.
# Prints one line per case with its time.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
chmod 755 "$work"  # the daemons run as the slurm and munge users
cluster=$work/cluster
trap 'bash "$srcdir/scripts/slurm/local-cluster.sh" stop "$cluster"; rm -rf "$work"' EXIT
export TMPDIR=$work
unset OMP_WAIT_POLICY
for tool in slurmctld slurmd munged sbatch; do
  command -v "$tool" > /dev/null || fail "$tool is missing: scripts/setup-deps.sh installs slurmctld, slurmd, slurm-client and munge"
done
bash "$srcdir/scripts/slurm/local-cluster.sh" start "$cluster" > "$work/cluster.log" 2>&1 || { cat "$work/cluster.log"; fail "no local SLURM"; }
export SLURM_CONF=$cluster/slurm.conf XTRAIN_BIN=$xtrain
write_recipe "$work/recipe.yaml" 40

# submit NAME [sbatch args...] -- [train args...]: the batch script, in $work, with its log in
# $work/NAME.out; prints the job id.
submit() {
  local name=$1 sbatch_args=()
  shift
  while [[ $1 != -- ]]; do sbatch_args+=("$1"); shift; done
  shift
  sbatch --parsable --chdir="$work" --job-name="$name" --output="$work/$name.out" "${sbatch_args[@]}" \
    "$srcdir/scripts/slurm/train.sbatch" "$work/recipe.yaml" --set run.dir="$work/$name" "$@"
}
job_field() { scontrol show job "$1" | grep -o "$2=[^ ]*" | head -1 | cut -d= -f2; }
# wait_state JOB STATE SECONDS
wait_state() {
  for _ in $(seq $((10 * $3))); do
    [[ $(job_field "$1" JobState) == "$2" ]] && return 0
    sleep 0.1
  done
  scontrol show job "$1"
  fail "job $1 not $2 within $3 s"
}
# steps_logged RUN: the steps metrics.jsonl holds (a resumed attempt repeats none: it appends after
# its checkpoint's step).
# (grep -c prints 0 and fails on a file not yet written to: one count either way.)
steps_logged() { if [[ -f $1/metrics.jsonl ]]; then grep -c '"step"' "$1/metrics.jsonl" || true; else echo 0; fi; }
# wait_steps RUN N: until RUN has logged N steps; a deadline for a run that is stuck, not a
# measure of speed (a requeue and a restart on a loaded machine take a minute or more).
wait_steps() {
  for _ in $(seq 3000); do
    (($(steps_logged "$1") >= $2)) && return 0
    sleep 0.1
  done
  fail "$1 did not reach $2 logged steps"
}
# losses RUN: "step loss" of each step, the last attempt's where a step ran twice.
losses() {
  "${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" -c '
import json, sys
last = {}
for line in open(sys.argv[1] + "/metrics.jsonl"):
    record = json.loads(line)
    if "loss" in record and "step" in record:
        last[record["step"]] = record["loss"]
print("\n".join(f"{step} {last[step]!r}" for step in sorted(last)))' "$1"
}
same_losses() {
  cmp -s <(losses "$work/launch") <(losses "$1") || {
    diff <(losses "$work/launch") <(losses "$1") | head
    fail "$1's losses differ from xtrain launch's"
  }
}
report() { printf 'slurm %-48s ok  %3d s\n' "$1" $(($(date +%s) - $2)); }

start=$(date +%s)
train launch 2
status=0
sbatch --wait --chdir="$work" --job-name=plain --output="$work/plain.out" "$srcdir/scripts/slurm/train.sbatch" \
  "$work/recipe.yaml" --set run.dir="$work/plain" > /dev/null || status=$?
((status == 0)) || { cat "$work/plain.out"; fail "the plain job exited $status"; }
same_losses "$work/plain"
report "2 tasks: xtrain launch's losses, bit for bit" "$start"

start=$(date +%s)
job=$(submit preempt --)
for attempt in 1 2 3; do
  # 4 steps of this attempt: an attempt runs on for a step or more past its signal, so a count
  # fixed in advance could be reached before the next attempt starts, and signal nothing.
  wait_steps "$work/preempt" $(($(steps_logged "$work/preempt") + 4))
  scancel --signal=USR1 "$job"
  wait_state "$job" PENDING 30  # requeued by the script; the hold SLURM puts on it is released here
  # slurmd revokes the killed attempt's credential with a time in whole seconds, and refuses a
  # launch whose credential bears that same second ("Job credential revoked"): start the next
  # attempt in a later second.
  sleep 1
  scontrol update JobId="$job" StartTime=now
done
wait_state "$job" COMPLETED 120
[[ $(job_field "$job" Restarts) == 3 ]] || fail "job $job restarted $(job_field "$job" Restarts) times, expected 3"
(($(grep -c "requeueing job $job" "$work/preempt.out") == 3)) || { cat "$work/preempt.out"; fail "the log lost an attempt"; }
same_losses "$work/preempt"
report "3 USR1 preemptions, requeued and resumed" "$start"

start=$(date +%s)
cat > "$work/lagging-xtrain" <<EOF
#!/bin/bash
# Rank 1 exits 0.3 s after its xtrain: the lag that made srun --kill-on-bad-exit kill it.
trap ':' USR1 TERM INT
"$xtrain" "\$@"
status=\$?
[[ \$SLURM_PROCID == 1 ]] && sleep 0.3
exit \$status
EOF
chmod +x "$work/lagging-xtrain"
job=$(XTRAIN_BIN=$work/lagging-xtrain submit lagging --)
wait_steps "$work/lagging" 6
scancel --signal=USR1 "$job"
wait_state "$job" PENDING 30
grep -q "requeueing job $job" "$work/lagging.out" || { cat "$work/lagging.out"; fail "no requeue"; }
scancel "$job"
report "one rank exits 0.3 s late: still requeued" "$start"

start=$(date +%s)
job=$(submit killed --)
wait_steps "$work/killed" 4
pkill -9 -f -n -- "run.dir=$work/killed"
killed_at=$(date +%s)
for _ in $(seq 150); do
  [[ $(job_field "$job" JobState) =~ ^(FAILED|COMPLETED|CANCELLED)$ ]] && break
  sleep 0.1
done
[[ $(job_field "$job" JobState) == FAILED ]] || { scontrol show job "$job"; fail "job $job did not fail within 15 s of kill -9"; }
(($(date +%s) - killed_at <= 10)) || fail "job $job took $(($(date +%s) - killed_at)) s to end"
[[ $(job_field "$job" Restarts) == 0 ]] || fail "a killed task was requeued"
report "kill -9 of a task: FAILED in $(($(date +%s) - killed_at)) s, not requeued" "$start"

start=$(date +%s)
job=$(submit restarted --export=ALL,XTRAIN_RESTARTS=1 --)
wait_steps "$work/restarted" 8  # past the step-5 checkpoint
pkill -9 -f -n -- "run.dir=$work/restarted"
wait_state "$job" COMPLETED 120
grep -qE "batch script: the step failed \(exit [0-9]+\); running it again on the nodes up, from checkpoints/latest \(restart 1 of 1\)" \
  "$work/restarted.out" || { cat "$work/restarted.out"; fail "the script did not run the step again"; }
grep -qE "resumed from .*/restarted/checkpoints/step-[0-9]+ at step" "$work/restarted.out" || fail "the second step did not resume"
[[ $(job_field "$job" Restarts) == 0 ]] || fail "the job was requeued; the script should have run the step again"
same_losses "$work/restarted"
report "kill -9 with XTRAIN_RESTARTS=1: the step ran again, resumed" "$start"

start=$(date +%s)
status=0
sbatch --wait --chdir="$work" --job-name=bad --output="$work/bad.out" "$srcdir/scripts/slurm/train.sbatch" \
  "$work/recipe.yaml" --set run.dir="$work/bad" --set optim.lrr=1 > /dev/null || status=$?
((status == 2)) || { cat "$work/bad.out"; fail "a bad recipe's job exited $status, expected 2"; }
grep -q "optim.lrr: unknown key (did you mean optim.lr?)" "$work/bad.out" || { cat "$work/bad.out"; fail "no recipe message"; }
report "a bad recipe: exit 2" "$start"
