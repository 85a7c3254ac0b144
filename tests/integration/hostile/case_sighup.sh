# SIGHUP (a lost terminal or ssh session) to one rank of a 2-rank FSDP run under `xtrain launch`:
# HUP is a default stop signal, so every rank saves the same step and the job exits 75; run
# again, it resumes and ends bit-identical to a run never interrupted (losses and exported weights).
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 150
train reference 2

# rank_pid LAUNCHER RANK: the pid of that rank's process.
rank_pid() {
  local pid
  for pid in $(pgrep -P "$1"); do grep -qz "^RANK=$2$" "/proc/$pid/environ" 2>/dev/null && { echo "$pid"; return; }; done
}
"$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train "$work/recipe.yaml" --set run.dir="$work/hup" \
  > "$work/hup.log" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do grep -q '"step":3,' "$work/hup/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
kill -HUP "$(rank_pid $launcher 1)"
status=0
wait $launcher || status=$?
[[ $status -eq 75 ]] || { cat "$work/hup.log"; fail "SIGHUP to rank 1: exit $status, expected 75"; }
expect_text "$work/hup.log" "run the same command to continue (exit 75)"
stopped=$(sed -n 's/.*stopped by .* after step \([0-9]*\); run the same command.*/\1/p' "$work/hup.log" | head -1)
[[ -n $stopped && $stopped -lt 150 ]] || { cat "$work/hup.log"; fail "no stop before the last step"; }
train hup 2
expect_text "$work/hup.log" "resumed from $work/hup/checkpoints/step-$stopped at step $stopped"
diff <(losses "$work/reference") <(losses "$work/hup") || fail "losses differ from the uninterrupted run"
"$xtrain" export "$work/reference/checkpoints/latest" "$work/reference-export" > /dev/null
"$xtrain" export "$work/hup/checkpoints/latest" "$work/hup-export" > /dev/null
cmp "$work/reference-export/model.safetensors" "$work/hup-export/model.safetensors"
check_neighbours "$work/neighbours"
echo "SIGHUP after step $stopped: exit 75; resumed run bit-identical to the uninterrupted one"
