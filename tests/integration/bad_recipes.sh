#!/usr/bin/env bash
# Each bad recipe must exit 2 with the exact `file:line:col: key: message` and leave no run
# folder behind.
set -uo pipefail
xtrain=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0
cases=0

# expect NAME EXPECTED_STDERR RECIPE_TEXT [xtrain train args...]
expect() {
  local name=$1 expected=$2 text=$3
  shift 3
  cases=$((cases + 1))
  printf '%s' "$text" > "$name.yaml"
  local stderr status
  stderr=$("$xtrain" train "$name.yaml" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status -ne 2 || "$stderr" != "$expected" ]]; then
    echo "FAIL $name: exit $status"
    echo "  expected: $expected"
    echo "  got:      $stderr"
    failures=$((failures + 1))
  fi
  if [[ -e "$work/run" ]]; then
    echo "FAIL $name: the run folder was created"
    failures=$((failures + 1))
    rm -rf "$work/run"
  fi
}

head="name: bad
run:
  dir: run
"

expect unknown_key "unknown_key.yaml:5:3: model.hiden_size: unknown key (did you mean model.hidden_size?)" \
"${head}model:
  hiden_size: 128
"
expect unknown_section "unknown_section.yaml:4:1: optimizer: unknown key (did you mean optim?)" \
"${head}optimizer:
  lr: 0.1
"
expect wrong_type "wrong_type.yaml:5:10: train.steps: expected an integer, got 'ten'" \
"${head}train:
  steps: ten
"
expect out_of_range "out_of_range.yaml:5:7: optim.lr: must be > 0, got -0.001" \
"${head}optim:
  lr: -0.001
"
expect bad_choice "bad_choice.yaml:5:13: optim.schedule: must be one of cosine, linear, constant, got 'step'" \
"${head}optim:
  schedule: step
"
expect heads_vs_hidden "heads_vs_hidden.yaml:6:3: model.num_heads: 5 heads do not divide hidden_size 128 (hidden_size must be a multiple of num_heads)" \
"${head}model:
  hidden_size: 128
  num_heads: 5
"
expect unknown_family "unknown_family.yaml:5:11: model.family: must be one of llama, qwen2, qwen3, qwen3_moe, mixtral, deepseek_v3, gpt_oss, bert, llava, vit, t5, clip, got 'gpt2'" \
"${head}model:
  family: gpt2
"
expect llava_without_tower "llava_without_tower.yaml:5:3: model.family: llava reads images through a vision tower, which only a Hugging Face folder describes: set model.init_from: hf:DIR to a folder whose config.json has a vision_config" \
"${head}model:
  family: llava
"
expect odd_head_dim "odd_head_dim.yaml:7:3: model.head_dim: head size head_dim = 7 must be even for rotary embeddings" \
"${head}model:
  family: qwen3
  num_heads: 4
  head_dim: 7
"
expect kv_heads_vs_heads "kv_heads_vs_heads.yaml:6:3: model.num_kv_heads: 3 kv heads do not divide num_heads 8 (each kv head serves a whole group of query heads)" \
"${head}model:
  num_heads: 8
  num_kv_heads: 3
"
expect batch_vs_micro "batch_vs_micro.yaml:5:3: train.global_batch_size: 12 is not a multiple of train.micro_batch_size 8 (global batch = micro batch x accumulation steps x data-parallel ranks)" \
"${head}train:
  global_batch_size: 12
  micro_batch_size: 8
"
expect missing_file "missing_file.yaml:5:3: data.train: file not found: corpus/missing.txt" \
"${head}data:
  train: corpus/missing.txt
"
expect missing_name "missing_name.yaml:1:1: name: required key missing (add \`name: ...\` to the recipe)" \
"run:
  dir: run
"
expect set_bad_value "--set train.steps=abc: train.steps: expected an integer, got 'abc'" \
"${head}" --set train.steps=abc
expect set_unknown_key "--set optim.lrr=0.1: optim.lrr: unknown key (did you mean optim.lr?)" \
"${head}" --set optim.lrr=0.1
expect all_at_once "all_at_once.yaml:5:3: model.hiden_size: unknown key (did you mean model.hidden_size?)
all_at_once.yaml:7:10: train.dtype: must be one of fp32, bf16, fp16, got 'fp8'
--set optim.warmup_steps=-1: optim.warmup_steps: must be >= 0, got -1" \
"${head}model:
  hiden_size: 128
train:
  dtype: fp8
" --set optim.warmup_steps=-1
expect init_from_missing "init_from_missing.yaml:5:3: model.init_from: hf_missing/config.json: not found; a Hugging Face model folder holds config.json and model.safetensors (or model.safetensors.index.json and its files)" \
"${head}model:
  init_from: hf:hf_missing
"
mkdir -p hf_rope
printf '%s' '{"model_type": "llama", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 128,
  "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 256,
  "rope_parameters": {"rope_type": "longrope", "factor": 4.0, "rope_theta": 10000.0}}' > hf_rope/config.json
expect init_from_rope_type "init_from_rope_type.yaml:5:3: model.init_from: hf_rope/config.json: rope type \"longrope\" ({\"factor\":4.0,\"rope_theta\":10000.0,\"rope_type\":\"longrope\"}); xtrain computes the default rotary embedding, llama3's scaling and yarn (a model trained with another would compute other logits here)" \
"${head}model:
  init_from: hf:hf_rope
"
expect moe_without_experts "moe_without_experts.yaml:5:3: model.family: qwen3_moe is a mixture of experts: set model.num_experts (and num_experts_per_tok, moe_intermediate_size)" \
"${head}model:
  family: qwen3_moe
"
expect experts_in_dense_family "experts_in_dense_family.yaml:6:3: model.num_experts: 8, but model.family llama has no experts (a MoE family such as qwen3_moe has)" \
"${head}model:
  family: llama
  num_experts: 8
  num_experts_per_tok: 2
  moe_intermediate_size: 64
"
expect top_k_above_experts "top_k_above_experts.yaml:7:3: model.num_experts_per_tok: 9 must be between 1 and model.num_experts 8" \
"${head}model:
  family: qwen3_moe
  num_experts: 8
  num_experts_per_tok: 9
  moe_intermediate_size: 64
"
expect ep_without_experts "ep_without_experts.yaml:5:3: parallel.ep: 2, but model.family llama has no experts to split; leave parallel.ep at 1" \
"${head}parallel:
  ep: 2
"
expect ep_not_dividing_experts "ep_not_dividing_experts.yaml:10:3: parallel.ep: 4 does not divide model.num_experts 6: each expert-parallel rank holds the same number of experts" \
"${head}model:
  family: qwen3_moe
  num_experts: 6
  num_experts_per_tok: 2
  moe_intermediate_size: 64
parallel:
  ep: 4
"
expect unknown_router "unknown_router.yaml:9:11: model.router: must be one of softmax, sigmoid_bias, got 'top1'" \
"${head}model:
  family: qwen3_moe
  num_experts: 8
  num_experts_per_tok: 2
  moe_intermediate_size: 64
  router: top1
"
expect mixtral_dense_layers "mixtral_dense_layers.yaml:9:3: model.first_k_dense: mixtral's layers are all mixtures of experts: leave first_k_dense at 0 and moe_layer_step at 1 (qwen3_moe places dense layers)" \
"${head}model:
  family: mixtral
  num_experts: 8
  num_experts_per_tok: 2
  moe_intermediate_size: 64
  first_k_dense: 1
"
expect tp_not_dividing_heads "tp_not_dividing_heads.yaml:8:3: parallel.tp: 3 does not divide model.num_heads 4: each tensor-parallel rank computes whole heads" \
"${head}model:
  num_heads: 4
  intermediate_size: 96
parallel:
  tp: 3
"
expect sequence_parallel_without_tp "sequence_parallel_without_tp.yaml:5:3: parallel.sequence_parallel: true splits activations over the tensor-parallel ranks, which needs parallel.tp above 1" \
"${head}parallel:
  sequence_parallel: true
"
expect tp_ep_not_dividing_experts "tp_ep_not_dividing_experts.yaml:11:3: parallel.tp: 2 x parallel.ep 2 does not divide model.num_experts 6: each tensor- and expert-parallel rank holds the same number of experts" \
"${head}model:
  family: qwen3_moe
  num_experts: 6
  num_experts_per_tok: 2
  moe_intermediate_size: 64
parallel:
  ep: 2
  tp: 2
"
expect virtual_stages_without_interleaving "virtual_stages_without_interleaving.yaml:7:3: parallel.pp_virtual_stages: 2 chunks per rank need parallel.pp_schedule interleaved_1f1b, zbv or dualpipev (it is 1f1b)" \
"${head}parallel:
  pp: 2
  fsdp: 1
  pp_virtual_stages: 2
"
expect pp_with_model_scope_balancing "pp_with_model_scope_balancing.yaml:10:3: model.router_aux_loss_scope: model balances over every layer's routing at once, which parallel.pp 2 splits over its stages: set model.router_aux_loss_scope layer (each layer's own balancing loss)" \
"${head}model:
  family: qwen3_moe
  num_experts: 4
  num_experts_per_tok: 2
  moe_intermediate_size: 64
  router_aux_loss_coef: 0.01
  router_aux_loss_scope: model
parallel:
  pp: 2
"
expect pp_with_global_balancing "pp_with_global_balancing.yaml:10:3: model.router_aux_loss_global_average: true defers the balancing loss to the end of the forward, which no stage of parallel.pp 2 runs whole: set it false (each micro batch's counts)" \
"${head}model:
  family: qwen3_moe
  num_experts: 4
  num_experts_per_tok: 2
  moe_intermediate_size: 64
  router_aux_loss_coef: 0.01
  router_aux_loss_global_average: true
parallel:
  pp: 2
"
expect pp_too_many_chunks "pp_too_many_chunks.yaml:7:3: parallel.pp: 4 x 2 chunks for 2 layers and the embedding and head: each chunk needs one of them" \
"${head}model:
  num_layers: 2
parallel:
  pp: 4
  fsdp: 1
  pp_schedule: interleaved_1f1b
  pp_virtual_stages: 2
"
printf '{"prompt": "2+3=", "answer": "5"}\n' > prompts.jsonl
expect grpo_format "grpo_format.yaml: grpo.reward.format: grpo.rewards lists format: set grpo.reward.format to the pattern a completion should match, e.g. '^<think>.*?</think>.*\$'" \
"${head}data:
  train: prompts.jsonl
  objective: grpo
  seq_len: 512
grpo:
  rewards: [number_match, format]
"
expect grpo_groups "grpo_groups.yaml:12:3: grpo.num_generations: a rollout batch of 12 completions (train.global_batch_size 12 x grpo.steps_per_rollout 1) does not hold whole groups of 8: make train.global_batch_size x grpo.steps_per_rollout a multiple of grpo.num_generations" \
"${head}data:
  train: prompts.jsonl
  objective: grpo
  seq_len: 512
train:
  global_batch_size: 12
  micro_batch_size: 4
grpo:
  num_generations: 8
  rewards: [exact_match]
"
expect yaml_syntax "yaml_syntax.yaml:6:1: invalid YAML: end of sequence flow not found" \
"${head}model:
  hidden_size: [128
"
cases=$((cases + 1))
stderr=$("$xtrain" train no_such_recipe.yaml 2>&1 >/dev/null)
if [[ $? -ne 2 || "$stderr" != "no_such_recipe.yaml: cannot read the recipe (check the path)" ]]; then
  echo "FAIL missing_recipe: $stderr"
  failures=$((failures + 1))
fi

echo "bad recipes: $((cases - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
