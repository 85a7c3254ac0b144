# A checkpoint whose weights or optimizer state hold NaN, with a manifest that verifies (re-written
# after the edit, as a user who changed the file with their own tools would): resuming checks
# every value, so checkpoint.resume auto falls back to the checkpoint before with a warning naming
# the tensor, strict exits 2, and a folder named in checkpoint.resume exits 2. Nothing outside the
# run folder changes.
source "$(dirname "$0")/lib.sh"
mkdir -p "$work/neighbours"
echo "a neighbouring file" > "$work/neighbours/notes.txt"
guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 4
short=(--set checkpoint.every=2 --set optim.warmup_steps=1)
train base 1 "${short[@]}"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
for run in auto strict named; do cp -r "$work/base" "$work/$run"; done

# nan_and_resign FOLDER FILE TENSOR: one NaN at the start of TENSOR, then manifest.json written
# again as xtrain writes it (XXH3-64 from libxxhash), so that the checksums all match.
nan_and_resign() {
  "$python" - "$@" <<'PY'
import ctypes, json, math, os, struct, sys
folder, file, tensor = sys.argv[1:4]
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
h = lambda data: "%016x" % xxh.XXH3_64bits(data, len(data))
with open(os.path.join(folder, file), "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    begin = json.loads(f.read(n))[tensor]["data_offsets"][0]
    f.seek(8 + n + begin); f.write(struct.pack("<f", math.nan))
files = {}
for name in sorted(os.listdir(folder)):
    if name == "manifest.json": continue
    data = open(os.path.join(folder, name), "rb").read()
    entry = {"size": len(data), "xxh3": h(data)}
    if name.endswith(".safetensors"):
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        entry["header_xxh3"] = h(data[:8 + n])
        entry["tensors"] = {k: h(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                            for k, v in header.items() if k != "__metadata__"}
    files[name] = entry
listing = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
manifest = {"format": 2, "checksum": "xxh3-64", "manifest_xxh3": h(listing), "files": files}
open(os.path.join(folder, "manifest.json"), "w").write(json.dumps(manifest, indent=1) + "\n")
PY
}
for run in auto strict; do nan_and_resign "$work/$run/checkpoints/step-4" model.safetensors model.norm.weight; done
nan_and_resign "$work/named/checkpoints/step-4" optimizer.safetensors exp_avg.model.norm.weight
nan="model.safetensors: tensor 'model.norm.weight' has 1 NaN and 0 infinite values of 64"
checked="the checksums of every file against manifest.json, and every weight and optimizer value finite"

expect_exit 2 "$work/strict.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/strict" "${short[@]}" \
  --set train.steps=6 --set checkpoint.resume=strict
expect_text "$work/strict.out" "$work/strict/checkpoints/step-4 failed verification ($checked): $nan; checkpoint.resume is strict, so the run stops"

expect_exit 0 "$work/auto.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/auto" "${short[@]}" --set train.steps=6
expect_text "$work/auto.out" "warning: skipping damaged checkpoint $work/auto/checkpoints/step-4: $nan; resuming from $work/auto/checkpoints/step-2 instead"
expect_text "$work/auto.out" "resumed from $work/auto/checkpoints/step-2 at step 2 (verified "
expect_text "$work/auto.out" ", every value finite)"
grep -q '"skipped":true' "$work/auto/metrics.jsonl" && fail "auto skipped steps after resuming"

expect_exit 2 "$work/named.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/named" "${short[@]}" \
  --set train.steps=6 --set checkpoint.resume="$work/named/checkpoints/step-4"
expect_text "$work/named.out" "$work/named/checkpoints/step-4 failed verification ($checked): optimizer.safetensors: tensor 'exp_avg.model.norm.weight' has 1 NaN and 0 infinite values of 64; the checkpoint is damaged: use an earlier one"

check_neighbours "$work/neighbours"
