#include "sluice/actors/mcp/stdio_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <system_error>

#include <boost/asio/write.hpp>

#include "sluice/actors/log.hpp"

extern char** environ;

namespace sluice::mcp {

namespace net = boost::asio;

namespace {

[[noreturn]] void fail(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

// A pipe whose two ends close on exec (the child gets its end by dup2).
struct pipe_pair {
  int fd[2] = {-1, -1};
  pipe_pair() {
    if (::pipe2(fd, O_CLOEXEC) != 0)
      fail(errno, "pipe");
  }
  ~pipe_pair() {
    for (int f : fd)
      if (f >= 0)
        ::close(f);
  }
  int release(int i) noexcept {
    int f = fd[i];
    fd[i] = -1;
    return f;
  }
};

// The node's environment with `extra` added; a name in `extra` replaces
// the node's.
std::vector<std::string>
environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv{*e};
    auto eq = kv.find('=');
    if (eq == std::string_view::npos)
      continue;
    vars[std::string{kv.substr(0, eq)}] = std::string{kv.substr(eq + 1)};
  }
  for (auto& [k, v] : extra)
    vars[k] = v;
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (auto& [k, v] : vars)
    out.push_back(k + "=" + v);
  return out;
}

} // namespace

stdio_child::stdio_child(net::io_context& loop, handlers h, size_t max_line)
    : channel(std::move(h))
    , in_(loop)
    , out_(loop)
    , err_(loop)
    , timer_(loop)
    , max_line_(max_line)
    , out_lines_(max_line) {
  // nop
}

stdio_child::~stdio_child() {
  // Never leaves a process behind: one that is still there is killed and
  // reaped here (a loop stopped before it exited).
  if (pid_ > 0 && !gone_) {
    kill_group(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::shared_ptr<stdio_child> stdio_child::spawn(net::io_context& loop,
                                                const child_command& cmd,
                                                handlers h,
                                                size_t max_line_bytes) {
  pipe_pair in, out, err;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  if (int e = posix_spawn_file_actions_init(&actions); e != 0)
    fail(e, "spawn");
  if (int e = posix_spawnattr_init(&attr); e != 0) {
    posix_spawn_file_actions_destroy(&actions);
    fail(e, "spawn");
  }
  struct cleanup {
    posix_spawn_file_actions_t* a;
    posix_spawnattr_t* t;
    ~cleanup() {
      posix_spawn_file_actions_destroy(a);
      posix_spawnattr_destroy(t);
    }
  } done{&actions, &attr};
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  // Nothing else of the node's: Asio opens its sockets without
  // SOCK_CLOEXEC, and a tool server must hold no client's connection, the
  // listener or an upstream's socket (glibc 2.34+).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!cmd.cwd.empty())
    posix_spawn_file_actions_addchdir_np(&actions, cmd.cwd.c_str());
  // A group of its own: a stop reaches what it started too. Signals the
  // node ignores (SIGPIPE) are the child's default again.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> argv_s{cmd.command};
  argv_s.insert(argv_s.end(), cmd.args.begin(), cmd.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  auto env_s = environment(cmd.env);
  std::vector<char*> envp;
  for (auto& e : env_s)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  auto child =
      std::make_shared<stdio_child>(loop, std::move(h), max_line_bytes);
  pid_t pid = -1;
  if (int e = posix_spawnp(&pid, cmd.command.c_str(), &actions, &attr,
                           argv.data(), envp.data());
      e != 0)
    fail(e, "cannot start '" + cmd.command + "'");
  child->pid_ = pid;
  // From here the child runs: the destructor reaps it should what follows
  // throw.
  child->in_.assign(in.release(1));
  child->out_.assign(out.release(0));
  child->err_.assign(err.release(0));
  child->in_.non_blocking(true);
  child->out_.non_blocking(true);
  child->err_.non_blocking(true);
  child->read_out();
  child->read_err();
  child->watch(std::chrono::seconds{1});
  return child;
}

std::string exit_words(int status) {
  if (status >= 0 && WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (status >= 0 && WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited";
}

void stdio_child::send(uint64_t, std::string text, send_done done, duration) {
  if (!write(std::move(text)) && done) {
    send_outcome out;
    out.ok = false;
    out.delivery = policy::mcp::delivery::not_sent;
    out.reason = "not sent: its input is full or closed";
    done(std::move(out));
  }
}

bool stdio_child::write(std::string line) {
  if (!in_.is_open() || stopping_ || gone_)
    return false;
  if (line.size() + 1 > max_child_queued_bytes - queued_bytes_)
    return false;
  line += '\n';
  queued_bytes_ += line.size();
  queue_.push_back(std::move(line));
  if (!writing_)
    write_next();
  return true;
}

void stdio_child::write_next() {
  if (queue_.empty() || !in_.is_open()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  net::async_write(
      in_, net::buffer(queue_.front()),
      [self = shared_from_this()](boost::system::error_code ec, size_t) {
        if (self->queue_.empty())
          return;
        self->queued_bytes_ -= self->queue_.front().size();
        self->queue_.pop_front();
        if (ec) { // it closed its input: nothing more goes in
          boost::system::error_code ignored;
          self->in_.close(ignored);
          self->queue_.clear();
          self->queued_bytes_ = 0;
          self->writing_ = false;
          return;
        }
        self->write_next();
      });
}

void stdio_child::read_out() {
  out_.async_read_some(
      net::buffer(out_chunk_),
      [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (ec) {
          // Its output ended: it is exiting (or did). Look soon.
          boost::system::error_code ignored;
          self->out_.close(ignored);
          if (!self->gone_)
            self->watch(std::chrono::milliseconds{20});
          return;
        }
        // Drops are told in their place among the lines.
        auto tell_drops = [&] {
          while (self->dropped_seen_ < self->out_lines_.dropped_lines()) {
            ++self->dropped_seen_;
            if (self->h_.dropped)
              self->h_.dropped();
          }
        };
        try {
          self->out_lines_.feed(std::string_view{self->out_chunk_, n},
                                [&](std::string_view line) {
                                  tell_drops();
                                  if (self->h_.message)
                                    self->h_.message(line);
                                });
          tell_drops();
        } catch (const std::exception& e) {
          // Its output can no longer be followed (no memory left): ended,
          // not left blocked on a pipe no one reads.
          logger().error("mcp child {}: reading its output failed: {}; "
                         "stopping it",
                         self->pid_, e.what());
          return self->stop(std::chrono::milliseconds{1000});
        }
        self->when_drained(self->out_.get_executor(),
                           [self] { self->read_out(); });
      });
}

void stdio_child::read_err() {
  err_.async_read_some(
      net::buffer(err_chunk_),
      [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (ec) {
          boost::system::error_code ignored;
          self->err_.close(ignored);
          return;
        }
        // Lines cut at `max_child_log_line`: the rest of a long one is
        // skipped up to its newline.
        for (size_t i = 0; i < n; ++i) {
          char c = self->err_chunk_[i];
          if (c == '\n') {
            if (!self->err_cut_ && self->h_.log_line)
              self->h_.log_line(self->err_buf_);
            self->err_buf_.clear();
            self->err_cut_ = false;
            continue;
          }
          if (self->err_cut_)
            continue;
          self->err_buf_ += c;
          if (self->err_buf_.size() >= max_child_log_line) {
            if (self->h_.log_line)
              self->h_.log_line(self->err_buf_);
            self->err_buf_.clear();
            self->err_cut_ = true;
          }
        }
        self->read_err();
      });
}

bool stdio_child::reaped() {
  if (gone_)
    return true;
  // Seen exited but not reaped yet: its group is killed while its id is
  // still its own (reaped, the id could be a new process's).
  siginfo_t info{};
  int w = ::waitid(P_PID, static_cast<id_t>(pid_), &info,
                   WEXITED | WNOHANG | WNOWAIT);
  if ((w == 0 && info.si_pid == 0) || (w < 0 && errno == EINTR))
    return false;      // still running (or ask again)
  kill_group(SIGKILL); // what it started may still run
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  gone_ = true;
  if (r < 0) // not ours to reap any more (ECHILD)
    status = -1;
  boost::system::error_code ignored;
  in_.close(ignored);
  out_.close(ignored);
  err_.close(ignored);
  timer_.cancel();
  queue_.clear();
  queued_bytes_ = 0;
  end(exit_words(status));
  return true;
}

void stdio_child::watch(std::chrono::milliseconds every) {
  if (gone_)
    return;
  timer_.expires_after(every);
  timer_.async_wait(
      [self = shared_from_this(), every](boost::system::error_code ec) {
        if (ec == net::error::operation_aborted && !self->gone_ &&
            self->timer_.expiry() > std::chrono::steady_clock::now())
          return; // replaced by a sooner look
        if (self->reaped())
          return;
        auto now = std::chrono::steady_clock::now();
        if (self->stopping_ && !self->termed_ && now >= self->term_at_) {
          self->termed_ = true;
          self->kill_group(SIGTERM);
        }
        if (self->stopping_ && now >= self->kill_at_)
          self->kill_group(SIGKILL);
        bool ending = self->stopping_ || !self->out_.is_open();
        self->watch(ending ? std::chrono::milliseconds{20} : every);
      });
}

void stdio_child::stop(std::chrono::milliseconds grace) {
  if (stopping_ || gone_)
    return;
  stopping_ = true;
  // MCP's stdio shutdown: its input ends first; SIGTERM if it is still
  // there halfway through the grace, SIGKILL at its end.
  boost::system::error_code ignored;
  in_.close(ignored);
  queue_.clear();
  queued_bytes_ = 0;
  auto now = std::chrono::steady_clock::now();
  term_at_ = now + grace / 2;
  kill_at_ = now + grace;
  watch(std::chrono::milliseconds{20});
}

void stdio_child::kill_group(int sig) noexcept {
  if (pid_ > 0)
    ::kill(-pid_, sig);
}

} // namespace sluice::mcp
