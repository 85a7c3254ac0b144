#include <catch2/catch.hpp>

#include "data/sources/text_source.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using xtrain::InputError;
using xtrain::data::check_source;
using xtrain::data::load_documents;
using xtrain::testing::ScratchDir;

TEST_CASE("check_source accepts builtins and existing paths", "[data]") {
  ScratchDir dir;
  const std::string file = dir.write("train.txt", "hello");
  CHECK_FALSE(check_source("builtin:demo").has_value());
  CHECK_FALSE(check_source("builtin:demo-eval").has_value());
  CHECK_FALSE(check_source(file).has_value());
  CHECK_FALSE(check_source(dir.path().string()).has_value());
}

TEST_CASE("check_source names the problem", "[data]") {
  CHECK(check_source("builtin:foo") ==
        "unknown builtin source 'builtin:foo' (expected builtin:demo or builtin:demo-eval)");
  CHECK(check_source("data/does-not-exist.txt") == "file not found: data/does-not-exist.txt");
  CHECK_THROWS_WITH(load_documents("data/does-not-exist.txt"),
                    "file not found: data/does-not-exist.txt");
  CHECK_THROWS_AS(load_documents("builtin:foo"), InputError);
}

TEST_CASE("a plain text file is one document", "[data]") {
  ScratchDir dir;
  const std::string text = "Line one.\n\nLine two, caf\xC3\xA9.\n";
  CHECK(load_documents(dir.write("story.txt", text)) == std::vector<std::string>{text});
}

TEST_CASE("an empty file is an input error", "[data]") {
  ScratchDir dir;
  const std::string path = dir.write("empty.txt", "");
  CHECK_THROWS_WITH(load_documents(path), path + ": file is empty");
}

TEST_CASE("JSONL: one document per line from the \"text\" field", "[data]") {
  ScratchDir dir;
  const std::string path = dir.write("train.jsonl",
                                     "{\"text\": \"first\", \"id\": 1}\n"
                                     "\n"  // blank lines are skipped
                                     "{\"text\": \"second\\nline \\u00e9\"}\r\n"
                                     "{\"text\": \"\"}\n"
                                     "{\"text\": \"last, no newline\"}");
  CHECK(load_documents(path) ==
        std::vector<std::string>{"first", "second\nline \xC3\xA9", "", "last, no newline"});
}

TEST_CASE("JSONL errors name the file and line", "[data]") {
  ScratchDir dir;
  const std::string missing =
      dir.write("missing.jsonl", "{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n");
  CHECK_THROWS_AS(load_documents(missing), InputError);
  CHECK_THROWS_WITH(load_documents(missing), missing + ":3: missing string field \"text\"");

  const std::string not_string = dir.write("number.jsonl", "{\"text\": 5}\n");
  CHECK_THROWS_WITH(load_documents(not_string), not_string + ":1: missing string field \"text\"");

  const std::string not_object = dir.write("array.jsonl", "[\"text\"]\n");
  CHECK_THROWS_WITH(load_documents(not_object), not_object + ":1: missing string field \"text\"");

  const std::string broken =
      dir.write("broken.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n");
  CHECK_THROWS_WITH(load_documents(broken),
                    Catch::StartsWith(broken + ":2: invalid JSON at column"));

  // Found by tests/fuzz/chat_jsonl.cpp: a number beyond double's range is the parser's out_of_range.
  const std::string huge = dir.write("huge.jsonl", "{\"text\": \"ok\", \"score\": 1e400}\n");
  CHECK_THROWS_WITH(load_documents(huge), Catch::StartsWith(huge + ":1: invalid JSON: ") &&
                                              Catch::Contains("number overflow parsing '1e400'"));

  const std::string blank = dir.write("blank.jsonl", "\n\n");
  CHECK_THROWS_WITH(load_documents(blank), Catch::StartsWith(blank + ": no documents"));
}

TEST_CASE("a directory is one document per file, sorted by name", "[data]") {
  ScratchDir dir;
  dir.write("corpus/b.txt", "bravo");
  dir.write("corpus/a.txt", "alpha");
  dir.write("corpus/c.md", "charlie");
  dir.write("corpus/nested/z.txt", "subdirectories are not read");
  CHECK(load_documents((dir.path() / "corpus").string()) ==
        std::vector<std::string>{"alpha", "bravo", "charlie"});
}

TEST_CASE("a directory without files is an input error", "[data]") {
  ScratchDir dir;
  std::filesystem::create_directories(dir.path() / "empty" / "only-a-subdirectory");
  const std::string path = (dir.path() / "empty").string();
  CHECK_THROWS_AS(load_documents(path), InputError);
  CHECK_THROWS_WITH(load_documents(path), path + ": directory contains no files");
}
