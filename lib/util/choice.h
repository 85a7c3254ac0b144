// Closed sets of named values: a recipe key's fixed choices (train.dtype, optim.schedule, ...)
// and the parallel mesh's dimensions. Each is an enum class E whose enumerators count up from 0
// with ONE table of names, `constexpr const char* to_string(E)`: a switch without default,
// declared between XTRAIN_CHOICES_BEGIN and XTRAIN_CHOICES_END, where a missing case is a
// compile error (-Wswitch as an error). Parsing, the lists of choices and printing all come
// from that table, so no list can fall behind its enum. The names are what recipes, dumped
// recipes, metrics and logs spell: changing one changes the files xtrain writes.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// A to_string whose switch misses an enumerator does not compile.
#define XTRAIN_CHOICES_BEGIN _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic error \"-Wswitch\"")
#define XTRAIN_CHOICES_END _Pragma("GCC diagnostic pop")

namespace xtrain::util {

// The number of enumerators: the values 0, 1, ... that the table names (past the last, its
// switch matches no case and returns nullptr).
template <class E>
constexpr size_t choice_count() {
  size_t count = 0;
  while (to_string(static_cast<E>(count)) != nullptr) ++count;
  return count;
}

// Every value, in declaration order.
template <class E>
std::vector<E> choices() {
  std::vector<E> values;
  for (size_t i = 0; i < choice_count<E>(); ++i) values.push_back(static_cast<E>(i));
  return values;
}

// Every value's name, in declaration order: the text of "must be one of ..." and the docs.
template <class E>
std::vector<std::string> choice_names() {
  std::vector<std::string> names;
  for (E value : choices<E>()) names.emplace_back(to_string(value));
  return names;
}

// The value of that name, exactly as spelled; nullopt for any other text.
template <class E>
std::optional<E> parse_choice(std::string_view text) {
  for (E value : choices<E>())
    if (text == to_string(value)) return value;
  return std::nullopt;
}

}  // namespace xtrain::util
