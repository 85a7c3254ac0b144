// Stop signals (train/stop_signal.h), in a forked child so that the handlers and the signals stay
// out of the test process: the first signal asks for a stop, a second one before the stop's
// checkpoint kills, and any one after it exits 75.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "train/stop_signal.h"
#include "util/exit_codes.h"

using namespace xtrain;

namespace {

// Runs body in a child with USR1 as a stop signal and returns its wait status.
template <typename Body>
int in_child(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    train::install_stop_signal_handlers({SIGUSR1});
    _exit(body());
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("a stop signal asks for a stop; a second one kills, unless the stop's checkpoint is saved", "[train][signal]") {
  const int asked = in_child([] {
    raise(SIGUSR1);
    return train::stop_requested() && train::stop_signal_number() == SIGUSR1 ? 0 : 1;
  });
  CHECK((WIFEXITED(asked) && WEXITSTATUS(asked) == 0));

  const int killed = in_child([] {
    raise(SIGUSR1);
    raise(SIGUSR1);
    return 0;
  });
  CHECK((WIFSIGNALED(killed) && WTERMSIG(killed) == SIGUSR1));

  const int after_save = in_child([] {
    raise(SIGUSR1);
    train::note_stop_checkpoint_saved();
    raise(SIGUSR1);
    return 0;
  });
  CHECK((WIFEXITED(after_save) && WEXITSTATUS(after_save) == kExitStopped));
}
