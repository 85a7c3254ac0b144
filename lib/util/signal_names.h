// The signals a recipe may name to stop a run cleanly (train.stop_signals: "TERM,INT,USR1"),
// spelled as kill -l spells them, with or without the SIG prefix.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace xtrain::util {

// std::nullopt when every name is known; else what is wrong and which names are.
std::optional<std::string> check_signal_list(const std::string& names);
// The signal numbers of a list that check_signal_list accepts.
std::vector<int> parse_signal_list(const std::string& names);
// "SIGTERM" for 15; "signal N" for one not in the list.
std::string signal_name(int signal_number);

}  // namespace xtrain::util
