#!/usr/bin/env python3
"""TRL's built-in reward functions as the reference of xtrain's format and overlong rewards
(lib/train/rewards.h, tests/unit/train/rewards_test.cpp).

    grpo_rewards_trl.py IN.jsonl MAX_COMPLETION_LEN SOFT_PUNISH_CACHE

IN holds one {"completion": "...", "tokens": N} a line. Prints one line a completion:
"FORMAT OVERLONG", TRL's think_format_reward of the completion (as a conversational completion,
one assistant message) and get_soft_overlong_punishment(MAX, CACHE) of N token ids.
"""
import json
import os
import sys

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trl.rewards import get_soft_overlong_punishment, think_format_reward


def main():
    path, max_len, cache = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    formats = think_format_reward([[{"role": "assistant", "content": row["completion"]}] for row in rows])
    overlong = get_soft_overlong_punishment(max_len, cache)([[0] * row["tokens"] for row in rows])
    for f, o in zip(formats, overlong):
        print(f"{f!r} {o!r}")


if __name__ == "__main__":
    main()
