#include <catch2/catch.hpp>

#include "data/sources/demo_corpus.h"
#include "data/sources/text_source.h"

using xtrain::data::demo_corpus;
using xtrain::data::demo_documents;
using xtrain::data::load_documents;

TEST_CASE("the demo corpus is embedded", "[data]") {
  const std::string_view corpus = demo_corpus();
  CHECK(corpus.size() > 300'000);
  CHECK(corpus.find('\0') == std::string_view::npos);
  CHECK(corpus.substr(0, 200).find("\n\n") != std::string_view::npos);
}

TEST_CASE("the demo corpus splits into stories", "[data]") {
  const std::vector<std::string> stories = demo_documents();
  REQUIRE(stories.size() >= 100);
  for (const auto& story : stories) {
    REQUIRE_FALSE(story.empty());
    CHECK(story.find("\n\n\n") == std::string::npos);
    CHECK(story.front() != '\n');
    CHECK(story.back() != '\n');
  }
}

TEST_CASE("builtin:demo and builtin:demo-eval partition the demo corpus", "[data]") {
  const std::vector<std::string> stories = demo_documents();
  const std::vector<std::string> train = load_documents("builtin:demo");
  const std::vector<std::string> eval = load_documents("builtin:demo-eval");
  REQUIRE_FALSE(eval.empty());
  CHECK(eval.size() == stories.size() / 20);  // the last 5%
  std::vector<std::string> joined = train;
  joined.insert(joined.end(), eval.begin(), eval.end());
  CHECK(joined == stories);
}
