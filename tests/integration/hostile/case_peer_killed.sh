# kill -9 of rank 0 (which hosts the job's store) in a 2-rank FSDP run: the surviving rank says
# in one line that rank 0 died, with its last step and collective; no C++ stack trace. Also when
# rank 1 is stalled in its step at that moment (as a long checkpoint write or a stretch without
# collectives would keep it): no collective of its own fails before the launcher's SIGKILL, 3 s
# after its SIGTERM, so its heartbeat thread reports rank 0 dead.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 3000

# kill_rank0 NAME STEP LAST: launches NAME (2 ranks; the environment as given), kills rank 0 with
# -9 once STEP is recorded, and checks the launch's exit and that rank 1 names rank 0 dead, its
# last heartbeat after step LAST (a pattern).
kill_rank0() {
  local name=$1 step=$2 last=$3 launcher pid status=0
  "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train "$work/recipe.yaml" \
    --set run.dir="$work/$name" > "$work/$name.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 300); do grep -q "\"step\":$step," "$work/$name/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
  # Three heartbeat intervals (0.5 s each): rank 1 has read rank 0's heartbeat, which it names.
  sleep 1.5
  for pid in $(pgrep -P $launcher); do grep -qz "^RANK=0$" "/proc/$pid/environ" && kill -9 "$pid"; done
  wait $launcher || status=$?
  [[ $status -eq 1 ]] || { cat "$work/$name.log"; fail "$name: exit $status, expected 1"; }
  ! grep -q "frame #\|Exception raised from" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: a C++ stack trace"; }
  survivor=$(grep -c '^\[rank 1\]' "$work/$name.log" || true)
  [[ $survivor -le 3 ]] || { cat "$work/$name.log"; fail "$name: rank 1 printed $survivor lines"; }
  expect_match "$work/$name.log" "^\[rank 1\]: error: .*Rank 0 has died: the job.s store it hosted at .* is gone too; its last heartbeat: after step $last, last collective "
  expect_text "$work/$name.log" "Signal 9 (SIGKILL) received by PID"
  grep '^\[rank 1\]' "$work/$name.log" || true
}

# Rank 1 trains on: its next collective fails at once on rank 0's closed connection.
kill_rank0 run 20 "[0-9]*"
# Rank 1 stalled at the start of step 25, rank 0 waiting on it in that step's first collective.
XTRAIN_FAULT=stall:1:25 kill_rank0 stalled 24 24
check_neighbours "$work/neighbours"
