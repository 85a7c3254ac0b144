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
# free_port's port is free when it answers, not when rank 0 binds it: a test beside this one may
# take it between the two. A launch whose store found its port taken (EADDRINUSE, before any step)
# is started again on another, up to three times.
train() {
  local name=$1 nproc=$2 attempt
  shift 2
  for attempt in 1 2 3; do
    local command=("$xtrain" train)
    [[ $nproc == 1 ]] || command=("$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- train)
    "${command[@]}" "$work/recipe.yaml" --set run.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 && return 0
    [[ $nproc != 1 && $attempt != 3 ]] && grep -q "EADDRINUSE" "$work/$name.log" || break
    echo "train $name: the store's port was taken; launching again on another"
  done
  cat "$work/$name.log"
  return 1
}

# reference RUN_NAME [args...]: `train RUN_NAME 1 args...` and its exported weights, computed
# once per build: a one-process run is the reference of many layouts, often the same recipe in
# several tests. The run folder and log are kept in the build folder (next to xtrain) under a key
# of xtrain's bytes, LibTorch's files (path, size, time), the CPU (its model, flags and count: MKL
# picks its kernels by them), the recipe, the arguments, the XTRAIN_, OMP_, MKL_, TORCH_ and ATEN_
# environment and the bytes of every file they name; a new binary is a new folder of keys, and
# the other binaries' folders are removed. A run that names a folder, a
# relative path or anything under $work (another run's checkpoint) is not kept. Tests side by
# side: one computes a key while the others wait on its lock, and an entry appears by a rename,
# whole or not at all.
reference() {
  local name=$1 root key entry
  shift
  root=$(dirname "$(readlink -f "$xtrain")")/test-references
  if [[ -z ${reference_binary:-} ]]; then
    reference_binary=$({ sha256sum < "$xtrain"; ldd "$xtrain" | grep -o '/[^ ]*libtorch[^ ]*' | sort -u |
                         xargs -r stat -L -c '%n %s %Y'; nproc; grep -m2 -E '^(model name|flags)' /proc/cpuinfo; } |
                       sha256sum | cut -c1-16)
  fi
  if ! key=$(reference_key "$@"); then
    train "$name" 1 "$@"
    export_latest "$work/$name"
    return
  fi
  entry=$root/$reference_binary/$key
  mkdir -p "$root/$reference_binary"
  local lock
  exec {lock}> "$entry.lock"
  flock "$lock"
  if [[ -d $entry ]]; then
    local origin
    origin=$(cat "$entry/origin")
    rm -rf "${work:?}/$name"
    cp -a "$entry/run" "$work/$name"
    cp "$entry/run.log" "$work/$name.log"
    # The run's folder as its metrics, log and export.source name it. The checkpoints keep the
    # first run's (their manifest holds the checksum of the recipe inside).
    sed -i "s|$origin|$work/$name|g" "$work/$name/metrics.jsonl" "$work/$name/export.source" "$work/$name.log"
  else
    if ! { train "$name" 1 "$@" && export_latest "$work/$name"; }; then
      exec {lock}>&-
      return 1
    fi
    local staging
    staging=$(mktemp -d "$root/$reference_binary/.staging.XXXXXX")
    cp -a "$work/$name" "$staging/run"
    cp "$work/$name.log" "$staging/run.log"
    echo "$work/$name" > "$staging/origin"
    mv "$staging" "$entry"
    find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$reference_binary" -exec rm -rf {} +
  fi
  exec {lock}>&-
}

# reference_key [args...]: the key of a one-process run of $work/recipe.yaml with these
# arguments (see reference); fails for a run not to be kept.
reference_key() {
  local text token files=()
  text=$(cat "$work/recipe.yaml"; printf '\n%s' "$@"; env | grep -E '^(XTRAIN_|OMP_|MKL_|TORCH_|ATEN_|RANK=)' | sort)
  [[ $text != *"$work"* ]] || return 1
  while read -r token; do
    [[ $token == /* && -f $token ]] || return 1
    files+=("$token")
  done < <(grep -oE "[^ \"'=:]*/[^ \"',]*" <<< "$text" | sort -u)
  { printf '%s\n' "$text"; [[ ${#files[@]} == 0 ]] || sha256sum "${files[@]}"; } | sha256sum | cut -c1-32
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

# without_timing METRICS_FILE: the step records without the fields that vary from run to run (and without
# the records of checkpoints and resumes, which a resumed run has and a straight one lacks).
without_timing() { grep -v '"checkpoint":\|"resumed_from":' "$1" | sed -E 's/"(tokens_per_s|step_s|peak_rss_mib|peak_device_mib|comm_wait_s|data_wait_s|data_read_s|busy_s_mean|busy_s_max|slowest_rank|peak_rss_mib_max|peak_device_mib_max|peak_rss_rank|persistent_slow_rank|persistent_slow_ratio)":[^,}]*,?//g; s/,}/}/'; }
