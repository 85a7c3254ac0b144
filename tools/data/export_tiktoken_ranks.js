#!/usr/bin/env node
// Writes the BPE ranks that the npm package js-tiktoken ships as standard tiktoken rank files
// (one "<base64 token> <rank>" per line, by rank), the format of OpenAI's
// cl100k_base.tiktoken and of xtrain's tiktoken:PATH.
//
//   node tools/data/export_tiktoken_ranks.js NODE_MODULES OUT_DIR gpt2 cl100k_base o200k_base
//
// js-tiktoken compresses its ranks (dist/ranks/NAME.cjs, field bpe_ranks): each line is
// "<tag> <first rank> <token> <token> ...", the tokens taking consecutive ranks from the first.
"use strict";
const fs = require("fs");
const path = require("path");

const [modules, outDir, ...names] = process.argv.slice(2);
if (!modules || !outDir || names.length === 0) {
  console.error("usage: export_tiktoken_ranks.js NODE_MODULES OUT_DIR ENCODING...");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
for (const name of names) {
  const data = require(path.resolve(modules, "js-tiktoken", "dist", "ranks", `${name}.cjs`));
  const byRank = [];
  for (const line of data.bpe_ranks.split("\n")) {
    if (!line) continue;
    const [, first, ...tokens] = line.split(" ");
    const offset = Number.parseInt(first, 10);
    tokens.forEach((token, i) => { byRank[offset + i] = token; });
  }
  const lines = [];
  byRank.forEach((token, rank) => { if (token !== undefined) lines.push(`${token} ${rank}\n`); });
  const file = path.join(outDir, `${name}.tiktoken`);
  fs.writeFileSync(file, lines.join(""));
  console.log(`${file}: ${lines.length} ranks`);
}
