#!/usr/bin/env node
// Trains small byte-level BPE tokenizers on a text and writes them as Hugging Face
// tokenizer.json files, one per pre-tokenizer style, for the tokenizer parity tests:
//
//   node train_hf_bpe.js NODE_MODULES TEXT OUT_DIR [MERGES]
//
//   gpt2.json     ByteLevel(use_regex) pre-tokenizer, merges written as "a b" strings
//   llama3.json   Split(GPT-4 regex) + ByteLevel(use_regex=false), ignore_merges
//   qwen2.json    NFC normalizer, Split(Qwen2 regex) + ByteLevel, a normalized added word
//   mixed.json    Digits, literal and regex Splits with every behavior, add_prefix_space
//
// Each has special tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <mask> with lstrip and
// rstrip). The Node binding of tokenizers exposes no BPE trainer, so this file holds a plain
// one: start from the 256 byte-level symbols, repeatedly merge the most frequent adjacent pair
// (ties broken by the pair's spelling) over the pre-tokenized words. Each file is loaded and
// saved by the library itself, so it is in the library's own format.
"use strict";
const fs = require("fs");
const path = require("path");

const [modules, textPath, outDir, mergesArg] = process.argv.slice(2);
if (!outDir) {
  console.error("usage: train_hf_bpe.js NODE_MODULES TEXT OUT_DIR [MERGES]");
  process.exit(2);
}
const hf = require(path.resolve(modules, "tokenizers"));
const mergeCount = Number.parseInt(mergesArg || "1000", 10);
const text = fs.readFileSync(textPath, "utf8");

const GPT4_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const byteLevel = (addPrefixSpace, useRegex) =>
  ({ type: "ByteLevel", add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: useRegex });
const split = (pattern, behavior, invert = false) => ({ type: "Split", pattern, behavior, invert });

const STYLES = {
  gpt2: { preTokenizer: byteLevel(false, true), normalizer: null, stringMerges: true },
  llama3: {
    preTokenizer: { type: "Sequence", pretokenizers: [split({ Regex: GPT4_PATTERN }, "Isolated"), byteLevel(false, false)] },
    normalizer: null,
    ignoreMerges: true,
  },
  qwen2: {
    preTokenizer: { type: "Sequence", pretokenizers: [split({ Regex: QWEN2_PATTERN }, "Isolated"), byteLevel(false, false)] },
    normalizer: { type: "NFC" },
    addedWords: ["cafe\u0301 au lait"],
  },
  mixed: {
    preTokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Digits", individual_digits: false },
        split({ String: ", " }, "MergedWithNext"),
        split({ Regex: "[-=(]" }, "MergedWithNext"),
        split({ Regex: "[.!?]" }, "MergedWithPrevious"),
        split({ Regex: "[^\\n]+" }, "Contiguous", true),
        split({ Regex: "\\t" }, "Removed"),
        byteLevel(true, true),
      ],
    },
    normalizer: null,
  },
};

const SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

function emptyTokenizerJson(style) {
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: [],
    normalizer: style.normalizer, pre_tokenizer: style.preTokenizer, post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: !!style.ignoreMerges, vocab: {}, merges: [] },
  };
}

function train(style) {
  const probe = hf.Tokenizer.fromString(JSON.stringify(emptyTokenizerJson(style)));
  const normalizer = probe.getNormalizer();
  const normalized = normalizer ? normalizer.normalizeString(text) : text;
  const counts = new Map();
  for (const [piece] of probe.getPreTokenizer().preTokenizeString(normalized))
    counts.set(piece, (counts.get(piece) || 0) + 1);
  const words = [...counts].map(([piece, count]) => ({ symbols: Array.from(piece), count }));

  const vocab = {};
  for (const symbol of hf.byteLevelAlphabet().sort()) vocab[symbol] = Object.keys(vocab).length;
  const merges = [];
  while (merges.length < mergeCount) {
    const pairs = new Map();
    for (const { symbols, count } of words)
      for (let i = 0; i + 1 < symbols.length; ++i) {
        const key = symbols[i] + "\u0000" + symbols[i + 1];
        pairs.set(key, (pairs.get(key) || 0) + count);
      }
    let best = null, bestCount = 1;
    for (const [key, count] of pairs)
      if (count > bestCount || (count === bestCount && best !== null && key < best)) { best = key; bestCount = count; }
    if (best === null) break;
    const [left, right] = best.split("\u0000");
    const merged = left + right;
    if (!(merged in vocab)) vocab[merged] = Object.keys(vocab).length;
    merges.push([left, right]);
    for (const word of words) {
      const s = word.symbols, out = [];
      for (let i = 0; i < s.length; ++i) {
        if (i + 1 < s.length && s[i] === left && s[i + 1] === right) { out.push(merged); ++i; } else out.push(s[i]);
      }
      word.symbols = out;
    }
  }
  return { vocab, merges };
}

fs.mkdirSync(outDir, { recursive: true });
for (const [name, style] of Object.entries(STYLES)) {
  const json = emptyTokenizerJson(style);
  const { vocab, merges } = train(style);
  json.model.vocab = vocab;
  json.model.merges = merges;
  let id = Object.keys(vocab).length;
  const added = (content, special, extra = {}) => json.added_tokens.push({
    id: id++, content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special, ...extra });
  for (const content of SPECIAL) added(content, true);
  added("<mask>", true, { lstrip: true, rstrip: true });
  for (const content of style.addedWords || []) added(content, false);

  const file = path.join(outDir, `${name}.json`);
  hf.Tokenizer.fromString(JSON.stringify(json)).save(file);
  if (style.stringMerges) {
    const saved = JSON.parse(fs.readFileSync(file, "utf8"));
    saved.model.merges = saved.model.merges.map((pair) => (Array.isArray(pair) ? pair.join(" ") : pair));
    fs.writeFileSync(file, JSON.stringify(saved));
    hf.Tokenizer.fromFile(file);  // the library accepts the string form too
  }
  console.log(`${file}: ${Object.keys(vocab).length} tokens, ${merges.length} merges, ${json.added_tokens.length} added`);
}
