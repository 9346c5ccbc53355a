#pragma once

// A child process for tests that run the built binaries (sluice-node, or a
// test executable re-run for one hidden case): its output drained by a
// thread of its own (a child never blocks on a full pipe) and read line by
// line, its exit awaited with a bound, and SIGKILL at destruction so a
// failed test leaves nothing running.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace sluice::testing {

class child_process {
public:
  struct options {
    // stderr goes to the same pipe as stdout (otherwise it is inherited).
    bool merge_stderr = false;
    // The child will run out of file descriptors on purpose (see
    // `environment_without_descriptors`).
    bool exhausts_descriptors = false;
    // Extra NAME=VALUE entries for the child's environment.
    std::vector<std::string> env;
  };

  // Runs argv[0] (a path) with `argv`; throws if it cannot be started.
  explicit child_process(std::vector<std::string> argv);
  child_process(std::vector<std::string> argv, options opts);
  ~child_process();

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }

  // The next line of output ("" at the end).
  std::string line();
  // The next line if one comes within `limit` (nothing: none came, or the
  // output ended).
  std::optional<std::string> line_within(std::chrono::milliseconds limit);

  // Everything left on the output, until the child has closed it (exited).
  std::string rest();

  // The port from "sluice-node listening on http://127.0.0.1:PORT (...)",
  // read from the next line; throws with the line if it says otherwise.
  uint16_t listening_port();

  void signal(int sig) const;

  // Whether the process is still running (reaps it when it is not).
  bool alive();

  // Waits (bounded) for the exit; the exit code, or -1 if it was killed by
  // a signal or is still running.
  int wait_exit(std::chrono::seconds limit = std::chrono::seconds{30});

  // Waits (bounded; SIGKILL after `limit`) and returns the raw wait status.
  int wait_status(std::chrono::seconds limit = std::chrono::seconds{60});

private:
  void drain();

  pid_t pid_ = -1;
  int out_ = -1;
  int status_ = 0;
  std::mutex mx_;
  std::condition_variable cv_;
  std::string buffer_; // read, not yet taken
  bool eof_ = false;
  std::thread reader_;
};

// This process's environment for a child that exhausts its descriptors.
// UBSan's vptr check probes memory through pipe(); with no descriptor left
// every probe fails and each first-seen cast is reported as an "invalid
// vptr" (false). UBSan reads its suppressions file lazily, at the first
// report, which also needs a descriptor; so the child's vptr reports do
// not halt it (the build makes only them recoverable), and
// `undefined_behaviour` sorts the output afterwards.
std::vector<std::string> environment_without_descriptors();

// The UBSan reports in a child's output, except the vptr check's ("...
// address X which does not point to an object of type T", noted "invalid
// vptr" or "object is of type T'"): in a process whose descriptors come and
// go at the limit that check's probes fail at random (a report may even
// print the memory it could not probe a moment before, or name the very
// type it expected), so its verdict means nothing there. The same code
// paths run under the full check in every other test.
std::vector<std::string> undefined_behaviour(const std::string& output);

} // namespace sluice::testing
