#include <catch2/catch.hpp>

#include "launch/line_prefixer.h"

using xtrain::launch::LinePrefixer;
using xtrain::launch::rank_prefix;

TEST_CASE("launch line prefixer: whole lines only, each prefixed", "[launch]") {
  LinePrefixer prefixer(rank_prefix(3));
  CHECK(prefixer.feed("one\ntw") == "[rank 3]: one\n");
  CHECK(prefixer.feed("o\n\nthree") == "[rank 3]: two\n[rank 3]: \n");
  CHECK(prefixer.flush() == "[rank 3]: three\n");
  CHECK(prefixer.flush().empty());
  CHECK(prefixer.feed("").empty());
}

TEST_CASE("launch line prefixer: an endless line is cut", "[launch]") {
  LinePrefixer prefixer("> ", 4);
  CHECK(prefixer.feed("abcdefghij") == "> abcd\n> efgh\n");
  CHECK(prefixer.feed("\n") == "> ij\n");
  CHECK(prefixer.feed("abcd\n") == "> abcd\n");  // exactly max_line before the newline
}
