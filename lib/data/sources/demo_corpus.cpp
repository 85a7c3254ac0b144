#include "data/sources/demo_corpus.h"

// The corpus bytes are assembled straight into .rodata: no generated source, no size limit
// of a string literal, and CMake rebuilds this file when corpus.txt changes (OBJECT_DEPENDS).
// No NUL is appended; the size comes from the end symbol.
asm(".section .rodata\n"
    ".balign 16\n"
    "xtrain_demo_corpus_begin:\n"
    ".incbin \"" XTRAIN_DEMO_CORPUS "\"\n"
    "xtrain_demo_corpus_end:\n"
    ".previous\n");

extern "C" const char xtrain_demo_corpus_begin[];
extern "C" const char xtrain_demo_corpus_end[];

namespace xtrain::data {

std::string_view demo_corpus() {
  return {xtrain_demo_corpus_begin,
          static_cast<size_t>(xtrain_demo_corpus_end - xtrain_demo_corpus_begin)};
}

std::vector<std::string> demo_documents() {
  static constexpr std::string_view kSeparator = "\n\n\n";
  const std::string_view corpus = demo_corpus();
  std::vector<std::string> documents;
  size_t start = 0;
  while (start < corpus.size()) {
    size_t end = corpus.find(kSeparator, start);
    if (end == std::string_view::npos) end = corpus.size();
    std::string_view story = corpus.substr(start, end - start);
    // Trim newlines so that extra blank lines between stories leave no empty documents.
    while (!story.empty() && story.front() == '\n') story.remove_prefix(1);
    while (!story.empty() && story.back() == '\n') story.remove_suffix(1);
    if (!story.empty()) documents.emplace_back(story);
    start = end + kSeparator.size();
  }
  return documents;
}

}  // namespace xtrain::data
