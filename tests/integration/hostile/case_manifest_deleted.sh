# Deleting a checkpoint's manifest.json does not turn verification off: a folder with xtrain's
# trainer_state.json but no manifest is damaged. With 64 bytes of a tensor flipped and the
# manifest deleted, checkpoint.resume auto falls back to the checkpoint before with a warning and
# trains on from it; strict exits 2 naming the missing manifest. Editing the manifest (dropping
# the damaged file from it) or trainer_state.json is detected and named. Never exit 0 on the
# damaged checkpoint; nothing outside the run folder changes.
source "$(dirname "$0")/lib.sh"
mkdir -p "$work/neighbours"
echo "a neighbouring file" > "$work/neighbours/notes.txt"
guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 4
short=(--set checkpoint.every=2 --set optim.warmup_steps=1)
train base 1 "${short[@]}"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
for run in auto strict edited state; do cp -r "$work/base" "$work/$run"; done

# 64 bytes flipped in the middle of one tensor of step-4, and its manifest deleted.
flip_64() {
  "$python" - "$1" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    header_length = struct.unpack("<Q", f.read(8))[0]
    begin, end = json.loads(f.read(header_length))["model.layers.1.mlp.up_proj.weight"]["data_offsets"]
    offset = 8 + header_length + (begin + end) // 2
    f.seek(offset); data = f.read(64); f.seek(offset); f.write(bytes(b ^ 0xFF for b in data))
PY
}
for run in auto strict edited; do flip_64 "$work/$run/checkpoints/step-4/model.safetensors"; done
rm "$work/auto/checkpoints/step-4/manifest.json" "$work/strict/checkpoints/step-4/manifest.json"
missing="manifest.json: missing, but the folder holds optimizer.safetensors, trainer_state.json: every checkpoint xtrain writes has a manifest, so it was deleted or lost and nothing in the folder can be verified"
checked="the checksums of every file against manifest.json, and every weight and optimizer value finite"

expect_exit 2 "$work/strict.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/strict" "${short[@]}" \
  --set train.steps=6 --set checkpoint.resume=strict
expect_text "$work/strict.out" "$work/strict/checkpoints/step-4 failed verification ($checked): $missing; checkpoint.resume is strict, so the run stops"
[[ ! -e $work/strict/checkpoints/step-6 ]] || fail "strict wrote step-6"

expect_exit 0 "$work/auto.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/auto" "${short[@]}" --set train.steps=6
expect_text "$work/auto.out" "warning: skipping damaged checkpoint $work/auto/checkpoints/step-4: $missing; resuming from $work/auto/checkpoints/step-2 instead"
expect_text "$work/auto.out" "resumed from $work/auto/checkpoints/step-2 at step 2 (verified "
grep -q '"step":3,' "$work/auto/metrics.jsonl" || fail "auto did not train step 3 again from step-2"
[[ $(readlink "$work/auto/checkpoints/latest") == step-6 ]] || fail "auto did not reach step-6"

# The manifest edited so that it no longer lists the damaged file: its own checksum and the
# unlisted file are both named.
"$python" - "$work/edited/checkpoints/step-4/manifest.json" <<'PY'
import json, sys
manifest = json.load(open(sys.argv[1]))
del manifest["files"]["model.safetensors"]
json.dump(manifest, open(sys.argv[1], "w"), indent=1)
PY
expect_exit 2 "$work/edited.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/edited" "${short[@]}" \
  --set train.steps=6 --set checkpoint.resume=strict
expect_text "$work/edited.out" "manifest.json: its listing does not match its own checksum (manifest_xxh3): the manifest was edited after it was written"
expect_text "$work/edited.out" "model.safetensors: not in the manifest (added after it was written, or the manifest was edited)"

# trainer_state.json edited (the step moved on): named by the manifest's checksum of it.
sed -i 's/"step": 4/"step": 40/' "$work/state/checkpoints/step-4/trainer_state.json"
expect_exit 2 "$work/state.out" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/state" "${short[@]}" \
  --set train.steps=6 --set checkpoint.resume=strict
expect_text "$work/state.out" "trainer_state.json: "
expect_text "$work/state.out" "checkpoint.resume is strict, so the run stops"

check_neighbours "$work/neighbours"
