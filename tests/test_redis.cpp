#include "test_redis.hpp"

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <stdexcept>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace sluice::testing {

namespace {

uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("test_redis: no free port");
  close(fd);
  return ntohs(addr.sin_port);
}

} // namespace

test_redis::test_redis()
    : port_(free_port()) {
  start();
}

test_redis::~test_redis() {
  stop();
}

redis_config test_redis::config(const std::string& prefix) const {
  redis_config c;
  c.host = "127.0.0.1";
  c.port = port_;
  c.key_prefix = prefix;
  c.connect_timeout = std::chrono::milliseconds{200};
  c.command_timeout = std::chrono::milliseconds{200};
  c.reconnect_after = std::chrono::milliseconds{100};
  return c;
}

void test_redis::start() {
  if (pid_ > 0)
    return;
  auto port = std::to_string(port_);
  std::vector<std::string> args{"redis-server",
                                "--port",
                                port,
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--loglevel",
                                "warning",
                                "--logfile",
                                "/dev/null",
                                "--enable-debug-command",
                                "local"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  auto rc = posix_spawnp(&pid_, "redis-server", &actions, nullptr, argv.data(),
                         environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("test_redis: cannot start redis-server (is it "
                             "installed? scripts/install-deps.sh)");
  }
  redis_client probe{config()};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (std::chrono::steady_clock::now() < deadline) {
    if (probe.command({"PING"}).ok())
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  stop();
  throw std::runtime_error("test_redis: redis-server did not answer on port " +
                           port);
}

void test_redis::freeze() {
  if (pid_ > 0)
    kill(pid_, SIGSTOP);
}

void test_redis::thaw() {
  if (pid_ > 0)
    kill(pid_, SIGCONT);
}

void test_redis::stop() {
  if (pid_ <= 0)
    return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

} // namespace sluice::testing
