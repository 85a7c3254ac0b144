# Shared by the distributed integration tests: a small recipe, a free port, and comparisons of
# runs (per-step losses from metrics.jsonl, final weights exported with `xtrain export`).

# write_recipe FILE STEPS: a 2-layer model, global batch 8 in micro batches of 2, checkpoints
# every 5 steps.
write_recipe() {
  cat > "$1" <<YAML
name: dist-check
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
data:
  seq_len: 64
train:
  steps: $2
  global_batch_size: 8
  micro_batch_size: 2
  log_every: 5
  threads: 1
optim:
  lr: 3.0e-3
  warmup_steps: 5
checkpoint:
  every: 5
  keep: 10
YAML
}

# train RUN_NAME NPROC [args...]: trains $work/recipe.yaml into $work/RUN_NAME, as one process or
# as NPROC ranks under `xtrain launch`; the output goes to $work/RUN_NAME.log, shown on failure.
train() {
  local name=$1 nproc=$2
  shift 2
  local command=("$xtrain" train)
  [[ $nproc == 1 ]] || command=("$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- train)
  "${command[@]}" "$work/recipe.yaml" --set run.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 || {
    cat "$work/$name.log"
    return 1
  }
}

# A TCP port nothing listens on now.
free_port() {
  "${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A pair of free TCP ports P, P+1, for a job of several nodes under `xtrain launch` (the ranks'
# store and the launchers' store).
free_port_pair() {
  "${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - <<'PY'
import socket
for _ in range(100):
    a, b = socket.socket(), socket.socket()
    try:
        a.bind(("", 0)); port = a.getsockname()[1]; b.bind(("", port + 1))
        print(port); break
    except OSError:
        pass
    finally:
        a.close(); b.close()
PY
}

# compare_runs REFERENCE_RUN_DIR RUN_DIR [FIRST_STEP]: per-step losses and gradient norms within
# 1e-5 relative, exported final weights within 1e-5 absolute; prints the largest differences
# ("RUN: N steps, max loss difference ..., max grad norm difference ..., max weight difference ...").
# An optional WEIGHT_TOLERANCE replaces the weights' 1e-5 (see the MoE check that uses it), and
# an optional GRAD_NORM_TOLERANCE the gradient norms' 1e-5 (see the packed tensor-parallel check).
# The reference's export is reused while it is newer than the checkpoint it came from (one
# reference serves many layouts), and the weights are read with numpy: importing torch would cost
# two seconds a comparison.
compare_runs() {
  local reference=$1 run=$2 first=${3:-1} weight_tolerance=${4:-1e-5} grad_norm_tolerance=${5:-1e-5}
  export_latest "$reference"
  export_latest "$run"
  "${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$reference" "$run" "$first" "$weight_tolerance" "$grad_norm_tolerance" <<'PY'
import json, struct, sys
import numpy as np
reference, run, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
weight_tolerance, grad_norm_tolerance = float(sys.argv[4]), float(sys.argv[5])

def per_step(folder, key):
    records = [json.loads(line) for line in open(f"{folder}/metrics.jsonl")]
    return {r["step"]: r[key] for r in records if key in r and "loss" in r and r["step"] >= first}

def relative_error(key):
    a, b = per_step(reference, key), per_step(run, key)
    assert a.keys() == b.keys() and a, (key, sorted(a), sorted(b))
    return len(a), max(abs(a[s] - b[s]) / abs(a[s]) for s in a)

steps, loss_error = relative_error("loss")
_, grad_norm_error = relative_error("grad_norm")
def load_file(path):  # name -> float64 array; bf16 widened exactly (its bits are fp32's top half)
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        data = f.read()
    kinds = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = np.frombuffer(data[begin:end], dtype=kinds[info["dtype"]])
        if info["dtype"] == "BF16":
            values = (values.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = values.astype(np.float64).reshape(info["shape"])
    return tensors

wa, wb = load_file(f"{reference}/export/model.safetensors"), load_file(f"{run}/export/model.safetensors")
assert wa.keys() == wb.keys(), (sorted(wa), sorted(wb))
assert all(wa[k].shape == wb[k].shape for k in wa), [k for k in wa if wa[k].shape != wb[k].shape]
weight_errors = [float(np.abs(wa[k] - wb[k]).max(initial=0.0)) for k in wa]
weight_error = float("nan") if any(np.isnan(weight_errors)) else max(weight_errors)  # NaN fails
print(f"{run.split('/')[-1]}: {steps} steps, max loss difference {loss_error:.2e} (relative), "
      f"max grad norm difference {grad_norm_error:.2e} (relative), "
      f"max weight difference {weight_error:.2e} (absolute)")
assert loss_error <= 1e-5, loss_error
assert grad_norm_error <= grad_norm_tolerance, grad_norm_error
assert weight_error <= weight_tolerance, weight_error
PY
}

# export_latest RUN_DIR: RUN_DIR/export holds the weights of RUN_DIR's latest checkpoint.
export_latest() {
  local checkpoint
  checkpoint=$(readlink -f "$1/checkpoints/latest")
  [[ -f $1/export/model.safetensors && $1/export/model.safetensors -nt $checkpoint && $(cat "$1/export.source" 2>/dev/null) == "$checkpoint" ]] && return
  "$xtrain" export "$1/checkpoints/latest" "$1/export" --overwrite > /dev/null
  echo "$checkpoint" > "$1/export.source"
}

# losses RUN_DIR: the per-step losses, one per line, exactly as written.
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }

# without_timing METRICS_FILE: the step records without the fields that vary from run to run.
without_timing() { grep -v '"checkpoint":' "$1" | sed -E 's/"(tokens_per_s|step_s|peak_rss_mib|peak_device_mib|comm_wait_s|data_wait_s|data_read_s|busy_s_mean|busy_s_max|slowest_rank|peak_rss_mib_max|peak_device_mib_max|peak_rss_rank|persistent_slow_rank|persistent_slow_ratio)":[^,}]*,?//g; s/,}/}/'; }
