#include "child_process.hpp"

#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace sluice::testing {

namespace {

constexpr const char* ubsan_options = "UBSAN_OPTIONS=";

} // namespace

std::vector<std::string> environment_without_descriptors() {
  std::vector<std::string> env;
  std::string ubsan;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, ubsan_options, std::strlen(ubsan_options)) == 0)
      ubsan = *e;
    else
      env.emplace_back(*e);
  }
  // The last setting of a flag wins.
  env.push_back((ubsan.empty() ? std::string{ubsan_options} : ubsan + ":") +
                "halt_on_error=0");
  return env;
}

std::vector<std::string> undefined_behaviour(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in{output};
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  std::vector<std::string> found;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("runtime error:") == std::string::npos)
      continue;
    // Every report of the vptr check says this (the other checks halt).
    bool false_vptr =
        lines[i].find("which does not point to an object of type") !=
            std::string::npos ||
        (i + 1 < lines.size() &&
         lines[i + 1].find("invalid vptr") != std::string::npos);
    if (!false_vptr)
      found.push_back(lines[i]);
  }
  return found;
}

child_process::child_process(std::vector<std::string> argv)
  : child_process(std::move(argv), options{}) {
}

child_process::child_process(std::vector<std::string> argv, options opts) {
  if (argv.empty())
    throw std::invalid_argument("child_process: no program");
  int out[2];
  // Close-on-exec: no other child inherits this pipe's write end and
  // keeps it open (dup2 onto stdout clears the flag for this child).
  if (pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("child_process: pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (opts.merge_stderr)
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  if (opts.exhausts_descriptors)
    env_strings = environment_without_descriptors();
  else
    for (char** e = environ; *e != nullptr; ++e)
      env_strings.emplace_back(*e);
  for (auto& e : opts.env)
    env_strings.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_strings)
    env.push_back(e.data());
  env.push_back(nullptr);
  auto rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr,
                        args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    pid_ = -1;
    throw std::runtime_error("child_process: cannot start " + argv[0] + ": " +
                             std::strerror(rc));
  }
  out_ = out[0];
  reader_ = std::thread{[this] { drain(); }};
}

child_process::~child_process() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  // The child is gone: its end of the pipe is closed (unless a grandchild
  // inherited it; `prlimit` execs, so none here), so the reader sees EOF.
  if (reader_.joinable())
    reader_.join();
  if (out_ >= 0)
    close(out_);
}

void child_process::drain() {
  char chunk[4096];
  for (;;) {
    auto n = read(out_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    std::lock_guard<std::mutex> guard{mx_};
    if (n <= 0) {
      eof_ = true;
      cv_.notify_all();
      return;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    cv_.notify_all();
  }
}

std::string child_process::line() {
  std::unique_lock<std::mutex> guard{mx_};
  cv_.wait(guard, [&] {
    return eof_ || buffer_.find('\n') != std::string::npos;
  });
  auto nl = buffer_.find('\n');
  std::string l = buffer_.substr(0, nl);
  buffer_.erase(0, nl == std::string::npos ? std::string::npos : nl + 1);
  return l;
}

std::optional<std::string>
child_process::line_within(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> guard{mx_};
  if (!cv_.wait_for(guard, limit, [&] {
        return eof_ || buffer_.find('\n') != std::string::npos;
      }))
    return std::nullopt;
  auto nl = buffer_.find('\n');
  if (nl == std::string::npos && eof_ && buffer_.empty())
    return std::nullopt;
  std::string l = buffer_.substr(0, nl);
  buffer_.erase(0, nl == std::string::npos ? std::string::npos : nl + 1);
  return l;
}

std::string child_process::rest() {
  std::unique_lock<std::mutex> guard{mx_};
  cv_.wait(guard, [&] { return eof_; });
  return std::exchange(buffer_, {});
}

uint16_t child_process::listening_port() {
  constexpr std::string_view prefix = "listening on http://127.0.0.1:";
  std::string said;
  for (auto l = line(); !l.empty(); l = line()) {
    auto at = l.find(prefix);
    if (at != std::string::npos)
      return static_cast<uint16_t>(std::stoi(l.substr(at + prefix.size())));
    said += l + "\n";
  }
  throw std::runtime_error("sluice-node did not say where it listens: " +
                           said);
}

void child_process::signal(int sig) const {
  if (pid_ > 0)
    kill(pid_, sig);
}

bool child_process::alive() {
  if (pid_ <= 0)
    return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = status;
    pid_ = -1;
  }
  return pid_ > 0;
}

int child_process::wait_exit(std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (alive() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  if (pid_ > 0 || !WIFEXITED(status_))
    return -1;
  return WEXITSTATUS(status_);
}

int child_process::wait_status(std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (alive() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    pid_ = -1;
  }
  return status_;
}

} // namespace sluice::testing
