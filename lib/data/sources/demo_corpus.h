// The demo corpus: short English children's stories, generated from a template grammar by
// tools/data/make_demo_corpus.py (no third-party text) and embedded in the binary, so that
// `builtin:demo` trains out of the box with no data files.
//
// Layout: each story is a title line followed by paragraphs separated by one blank line;
// stories are separated by two blank lines ("\n\n\n"). The separator is plain text rather
// than a special marker so that a byte-level tokenizer never has to learn one.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::data {

// The corpus text exactly as in data/demo/corpus.txt (not NUL-terminated).
std::string_view demo_corpus();

// The corpus split into its stories, in order, without the separating blank lines.
std::vector<std::string> demo_documents();

}  // namespace xtrain::data
