#include "train/stop_signal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "util/exit_codes.h"
#include "util/input_error.h"

namespace xtrain::train {

namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_stop_saved = 0;

void on_signal(int signal_number) {
  if (g_stop_saved != 0) _exit(kExitStopped);  // the checkpoint is complete: nothing is lost by leaving now
  if (g_signal != 0) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  g_signal = signal_number;
}

std::string stop_path(const std::string& run_dir) { return run_dir + "/STOP"; }

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}
}  // namespace

void install_stop_signal_handlers(const std::vector<int>& signals) {
  for (int signal_number : signals) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a read or write in flight goes on; the step loop checks the flag
    ::sigaction(signal_number, &action, nullptr);
  }
}

bool stop_requested() { return g_signal != 0; }
void note_stop_checkpoint_saved() { g_stop_saved = 1; }
bool stop_checkpoint_saved() { return g_stop_saved != 0; }
int stop_signal_number() { return g_signal; }

StopFile inspect_stop_file(const std::string& run_dir) {
  struct stat info {};
  if (::lstat(stop_path(run_dir).c_str(), &info) != 0) return StopFile::none;
  return S_ISREG(info.st_mode) ? StopFile::regular : StopFile::not_a_file;
}

std::string not_a_stop_file_message(const std::string& run_dir) {
  const std::string path = stop_path(run_dir);
  struct stat info {};
  const char* kind = ::lstat(path.c_str(), &info) == 0 ? kind_of(info.st_mode) : "gone now";
  return fmt::format(
      "{} is {}: a STOP must be a regular file (touch {}), which the run removes when it stops. Remove this "
      "one (rm -r {}) and run the same command again",
      path, kind, path, path);
}

bool take_stop_file(const std::string& run_dir) {
  const StopFile file = inspect_stop_file(run_dir);
  if (file == StopFile::not_a_file) throw InputError(not_a_stop_file_message(run_dir));
  if (file == StopFile::none) return false;
  std::remove(stop_path(run_dir).c_str());
  return true;
}

void clear_stop_file_at_start(const std::string& run_dir, bool chief) {
  if (inspect_stop_file(run_dir) == StopFile::not_a_file) throw InputError(not_a_stop_file_message(run_dir));
  if (chief && take_stop_file(run_dir))
    fmt::print("found {} before the first step: removed, not obeyed (it was left from before this run; create it "
               "while the run trains to stop it)\n",
               stop_path(run_dir));
}

double stop_vote(StopFile file) {
  if (file == StopFile::not_a_file) return kRefusedStopFileVote;
  return stop_requested() || file == StopFile::regular ? 1.0 : 0.0;
}

}  // namespace xtrain::train
