# kill -9 of rank 0 (which hosts the job's store) in a 2-rank FSDP run: the surviving rank says
# in one line that rank 0 died, with its last step and collective; no C++ stack trace.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 3000
"$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train "$work/recipe.yaml" --set run.dir="$work/run" \
  > "$work/run.log" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do grep -q '"step":20,' "$work/run/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
# Three heartbeat intervals (0.5 s each): rank 1 has read rank 0's heartbeat, which it names.
sleep 1.5
for pid in $(pgrep -P $launcher); do grep -qz "^RANK=0$" "/proc/$pid/environ" && kill -9 "$pid"; done
status=0
wait $launcher || status=$?
[[ $status -eq 1 ]] || { cat "$work/run.log"; fail "exit $status, expected 1"; }
! grep -q "frame #\|Exception raised from" "$work/run.log" || { cat "$work/run.log"; fail "a C++ stack trace"; }
survivor=$(grep -c '^\[rank 1\]' "$work/run.log" || true)
[[ $survivor -le 3 ]] || { cat "$work/run.log"; fail "rank 1 printed $survivor lines"; }
# Rank 1 reports, naming rank 0: the launcher's SIGTERM only asks it to stop after its step, and
# its next collective fails at once on rank 0's closed connection, well within the launcher's
# failure grace (3 s) before SIGKILL.
expect_match "$work/run.log" '^\[rank 1\]: error: .*Rank 0 has died: the job.s store it hosted at .* is gone too; its last heartbeat: after step [0-9]*, last collective '
expect_text "$work/run.log" "Signal 9 (SIGKILL) received by PID"
check_neighbours "$work/neighbours"
grep '^\[rank 1\]' "$work/run.log" || true
