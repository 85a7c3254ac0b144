#!/usr/bin/env node
// Writes the token ids that a reference implementation gives for a text file, space-separated,
// for comparison with `xtrain tokenize`:
//
//   node reference_token_ids.js tiktoken NODE_MODULES ENCODING TEXT OUT   (js-tiktoken)
//   node reference_token_ids.js hf NODE_MODULES TOKENIZER_JSON TEXT OUT   (Hugging Face tokenizers)
//
// js-tiktoken: encode(text, [], []) is tiktoken's encode_ordinary (special-token text is
// ordinary text). tokenizers: encode(text, null, {addSpecialTokens: false}), so added tokens in
// the text are recognised and the post-processor adds nothing.
"use strict";
const fs = require("fs");
const path = require("path");

async function main() {
  const [kind, modules, what, textPath, outPath] = process.argv.slice(2);
  if (!outPath) {
    console.error("usage: reference_token_ids.js tiktoken|hf NODE_MODULES ENCODING|TOKENIZER_JSON TEXT OUT");
    process.exit(2);
  }
  const text = fs.readFileSync(textPath, "utf8");
  let ids;
  if (kind === "tiktoken") {
    const { getEncoding } = require(path.resolve(modules, "js-tiktoken"));
    ids = getEncoding(what).encode(text, [], []);
  } else if (kind === "hf") {
    const { Tokenizer } = require(path.resolve(modules, "tokenizers"));
    const encoding = await Tokenizer.fromFile(what).encode(text, null, { addSpecialTokens: false });
    ids = encoding.getIds();
  } else {
    console.error(`unknown reference '${kind}'`);
    process.exit(2);
  }
  fs.writeFileSync(outPath, ids.join(" ") + "\n");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
