// InputError: the user gave us something wrong (recipe, arguments, data, checkpoint files).
// The command line prints its message as is and exits with code 2; any other exception is a
// runtime failure (exit code 1). Messages name the file, the place and the fix.
#pragma once
#include <stdexcept>
#include <string>

namespace xtrain {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace xtrain
