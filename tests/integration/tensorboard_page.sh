#!/usr/bin/env bash
# TensorBoard serves a run's curves as xtrain wrote them: `tensorboard --logdir` on the run
# folder (127.0.0.1 only) lists its run, its scalars endpoint returns the loss of every step equal
# to metrics.jsonl (as float32), and its time-series page, opened in headless Chromium
# (tools/browser/page_capture.py), draws the loss card with the last step's value.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
board=
# TensorBoard writes under TMPDIR ($work) until it has exited: wait for it before removing it.
trap '[[ -z $board ]] || { kill "$board" 2>/dev/null; wait "$board" 2>/dev/null; }; rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 40
train run 1 --set train.log_every=10

port=$(free_port)
"$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/tensorboard" --logdir "$work/run" --host 127.0.0.1 --port "$port" > "$work/tensorboard.log" 2>&1 &
board=$!
"$python" - "$work" "$port" <<'PY' || { cat "$work/tensorboard.log"; exit 1; }
import json, sys, time, urllib.request
import numpy as np
work, port = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
deadline = time.time() + 60
while True:
    try:
        runs = json.load(urllib.request.urlopen(f"{base}/data/runs", timeout=2))
        if runs:
            break
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("FAIL: tensorboard did not list a run within 60 s")
    time.sleep(0.5)
assert runs == ["tensorboard"], runs
served = json.load(urllib.request.urlopen(f"{base}/data/plugin/scalars/scalars?run=tensorboard&tag=loss"))
expected = {r["step"]: r["loss"] for r in map(json.loads, open(f"{work}/run/metrics.jsonl")) if "loss" in r}
got = {step: value for _, step, value in served}
assert got.keys() == expected.keys(), (sorted(got), sorted(expected))
bad = [s for s in expected if got[s] != float(np.float32(expected[s]))]
assert not bad, ("steps whose served loss differs", bad)
# The page's data table shows the last value to 4 decimals, trailing zeros dropped.
last = f"{expected[max(expected)]:.4f}".rstrip("0").rstrip(".")
open(f"{work}/last_loss", "w").write(last)
print(f"tensorboard serves run {runs[0]}: loss of steps {min(got)}-{max(got)}, each equal to metrics.jsonl")
PY
"$python" "$srcdir/tools/browser/page_capture.py" "http://127.0.0.1:$port/?tagFilter=%5Eloss%24&smoothing=0#timeseries" \
  --wait-for "$(cat "$work/last_loss")" --text "$work/page.txt" --screenshot "$work/loss.png"
grep -qx "loss" "$work/page.txt" || { echo "FAIL: no loss card on the page"; cat "$work/page.txt"; exit 1; }
echo "tensorboard page: ok"
