// The MCP source over stdio against a child that breaks the rules (SPEC
// §13, "think like an attacker"): garbage on stdout, answers twice, floods
// of notifications and of log lines, silence, an exit mid-call. Each call
// gets one clear answer, retried only where safe; the bad lines are
// counted; a cancelled call is told to the child; the source's end ends
// the child. Real processes (tests/fakes/hostile_mcp_child.cpp), short
// timeouts, no duration asserted.

#include "sluice/actors/mcp/mcp_source.hpp"

#include "mcp_source_shared.hpp"
#include "sluice/actors/mcp/stdio_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using json = nlohmann::json;

namespace {

struct child_fixture {
  std::string log = "/tmp/sluice-hostile-mcp-" + std::to_string(::getpid()) +
                    "-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  mcp_source src;
  // Open across exec, as Asio's sockets are: the child must not get it.
  int canary = ::open("/dev/null", O_RDONLY);

  explicit child_fixture(
      std::vector<std::pair<std::string, std::string>> env = {},
      size_t max_message_bytes = 4096) {
    std::remove(log.c_str());
    mcp_server_settings c;
    c.name = "child";
    c.prefix = "c_";
    c.command = SLUICE_HOSTILE_MCP_CHILD;
    c.env = {{"FAKE_MCP_LOG", log}};
    c.env.insert(c.env.end(), env.begin(), env.end());
    c.idle_timeout = 400ms;
    c.init_timeout = 2s;
    c.restart_backoff = 50ms;
    c.restart_backoff_max = 200ms;
    c.stop_grace = 500ms;
    c.max_message_bytes = max_message_bytes;
    src = spawn_mcp_source(sys, c);
  }

  ~child_fixture() {
    caf::anon_send_exit(src.actor, caf::exit_reason::user_shutdown);
    std::remove(log.c_str());
    if (canary >= 0)
      ::close(canary);
  }

  template <class Pred>
  bool wait_until(Pred p, std::chrono::milliseconds most = 5s) {
    return mcp_source_test::wait_until(p, most);
  }

  bool ready() { return mcp_source_test::ready(src); }

  static call_request request(const std::string& tool,
                              const std::string& mode) {
    return mcp_source_test::request("mcp:child", tool, mode);
  }

  source_reply call(const std::string& tool, const std::string& mode) {
    return mcp_source_test::call(sys, src, request(tool, mode));
  }

  std::string logged() {
    std::ifstream f{log};
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

} // namespace

TEST_CASE_METHOD(child_fixture, "mcp stdio source: garbage, twice and "
                                "floods: each call one answer, the rest "
                                "counted") {
  REQUIRE(ready());
  CHECK(call("w", "ok").kind == policy::outcome_kind::ok);
  // Not JSON, cut JSON, a batch, invalid UTF-8, a line over the limit.
  auto bad = src.view->bad_lines.load();
  auto r = call("w", "garbage");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(src.view->bad_lines.load() == bad + 5);
  // Twice, and an answer to an id never asked: the first is the call's.
  bad = src.view->bad_lines.load();
  r = call("w", "twice");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(wait_until([&] { return src.view->bad_lines.load() == bad + 2; }));
  // 20,000 notifications, then the answer.
  r = call("w", "flood");
  CHECK(r.kind == policy::outcome_kind::ok);
  // 5,000 log lines and one of 100 KiB (logged at a rate limit, cut).
  r = call("w", "stderr");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(src.view->read().restarts == 0);
}

TEST_CASE_METHOD(child_fixture, "mcp stdio source: silence and an exit "
                                "mid-call, retried only where safe") {
  REQUIRE(ready());
  auto r = call("w", "silent");
  CHECK(r.kind == policy::outcome_kind::timeout);
  CHECK(r.unsafe_to_retry);
  // The server is told the gateway gave up on it.
  CHECK(wait_until(
      [&] { return logged().find("cancelled ") != std::string::npos; }));
  r = call("r", "silent");
  CHECK(r.kind == policy::outcome_kind::timeout);
  CHECK_FALSE(r.unsafe_to_retry);
  auto pid = src.view->read().pid;
  r = call("w", "exit");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK(r.unsafe_to_retry);
  CHECK(r.reason == "server exited");
  REQUIRE(ready());
  auto s = src.view->read();
  CHECK(s.restarts == 1);
  CHECK(s.pid != pid);
  CHECK(s.last_exit == "exited with status 3");
  r = call("r", "exit");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK_FALSE(r.unsafe_to_retry);
  REQUIRE(ready());
  CHECK(call("w", "ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(child_fixture, "mcp stdio source: a cancelled call is told "
                                "to the child, and the source's end ends it") {
  REQUIRE(ready());
  {
    caf::scoped_actor self{sys};
    self->send(src.actor, attempt_atom_v, request("w", "silent"));
    std::this_thread::sleep_for(100ms);
    // Not in the typed interface: the built-in sources take it anyway.
    self->send(caf::actor_cast<caf::actor>(src.actor), cancel_atom_v);
    CHECK(wait_until([&] { return src.view->cancels_sent.load() == 1; }));
  }
  CHECK(wait_until(
      [&] { return logged().find("cancelled ") != std::string::npos; }));
  auto pid = src.view->read().pid;
  REQUIRE(pid > 0);
  caf::anon_send_exit(src.actor, caf::exit_reason::user_shutdown);
  // Ended and reaped: no such process any more (not even a zombie).
  CHECK(wait_until([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; }, 3s));
}

TEST_CASE_METHOD(child_fixture, "mcp stdio source: the child holds none of "
                                "the node's file descriptors") {
  REQUIRE(ready());
  REQUIRE(canary >= 0);
  auto r = call("w", "fds");
  REQUIRE(r.kind == policy::outcome_kind::ok);
  // Its pipes only, not the canary the fixture left open across exec.
  CHECK(json::parse(r.body)["content"][0]["text"] == "0 1 2");
}

TEST_CASE_METHOD(child_fixture, "mcp stdio source: clients' progress tokens "
                                "may repeat, the server sees the gateway's, "
                                "each client its own") {
  REQUIRE(ready());
  caf::scoped_actor self{sys};
  auto with_token = [&](const std::string& tool, const std::string& mode) {
    auto req = request(tool, mode);
    auto payload = json::parse(req.payload);
    payload["params"]["_meta"]["progressToken"] = 7;
    req.payload = payload.dump();
    req.stream_to = caf::actor_cast<caf::actor>(self);
    req.stream_tag = 42;
    return req;
  };
  // The SDK's token is its message id: two clients send the same one.
  self->send(src.actor, attempt_atom_v, with_token("w", "silent"));
  source_reply out;
  out.reason = "no answer";
  self->request(src.actor, 10s, attempt_atom_v, with_token("r", "progress"))
      .receive([&](source_reply& r) { out = std::move(r); },
               [&](caf::error& e) { out.reason = to_string(e); });
  CAPTURE(out.reason, out.body);
  REQUIRE(out.kind == policy::outcome_kind::ok);
  auto seen = json::parse(
      json::parse(out.body)["content"][0]["text"].get<std::string>());
  CHECK(seen.get<std::string>().rfind("sluice-", 0) == 0);
  std::string relayed;
  self->receive(
      [&](stream_chunk_atom, uint64_t tag, std::string& text) {
        CHECK(tag == 42);
        relayed = std::move(text);
      },
      caf::after(2s) >> [] {});
  auto n = json::parse(relayed);
  CHECK(n["method"] == "notifications/progress");
  CHECK(n["params"]["progressToken"] == 7);
}

TEST_CASE("mcp stdio source: a listing the server never answers is asked "
          "again at its next list_changed") {
  child_fixture f{{{"FAKE_MCP_DEAF_LIST", "1"}}};
  // Started, its first tools/list unanswered (init_timeout_s: 2 s).
  CHECK(f.wait_until([&] {
    return f.src.view->read().state == mcp_server_view::state_kind::ready;
  }));
  CHECK_FALSE(f.src.view->read().tools);
  std::this_thread::sleep_for(2500ms);
  // Its list changed: asked again (before, the listing stayed busy for
  // ever and the tools never came).
  CHECK(f.call("w", "changed").kind == policy::outcome_kind::ok);
  CHECK(f.ready());
}

TEST_CASE("mcp stdio child: a child that writes faster than its owner "
          "reads is read no faster") {
  boost::asio::io_context loop;
  auto work = boost::asio::make_work_guard(loop);
  std::atomic<bool> backed_up{true};
  std::atomic<size_t> lines{0};
  std::atomic<bool> gone{false};
  mcp::channel::handlers h;
  h.message = [&](std::string_view) { ++lines; };
  h.backed_up = [&] { return backed_up.load(); };
  h.gone = [&](std::string) { gone = true; };
  // 200,000 lines (600 KB): more than one read.
  mcp::child_command cmd{"/bin/sh", {"-c", "yes {} | head -n 200000"}, {}, {}};
  auto child = mcp::stdio_child::spawn(loop, cmd, std::move(h), 4096);
  std::thread io{[&] { loop.run(); }};
  std::this_thread::sleep_for(300ms);
  // One read (16 KiB at most) while the owner is behind, then none.
  auto early = lines.load();
  CHECK(early <= 16384 / 3 + 1);
  std::this_thread::sleep_for(100ms);
  CHECK(lines.load() == early);
  backed_up = false;
  auto until = std::chrono::steady_clock::now() + 10s;
  while ((lines.load() < 200000 || !gone) &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  CHECK(lines.load() == 200000);
  CHECK(gone);
  boost::asio::post(loop, [&] {
    child.reset();
    work.reset();
  });
  io.join();
}

TEST_CASE_METHOD(child_fixture, "mcp stdio source: a child that closed its "
                                "stdin raises no SIGPIPE in the process") {
  // A service embedding Sluice may keep SIGPIPE's default: death.
  auto before = ::signal(SIGPIPE, SIG_DFL);
  REQUIRE(ready());
  CHECK(call("w", "closein").kind == policy::outcome_kind::ok);
  // Written into the closed pipe: EPIPE, a failed call, this process alive.
  auto r = call("w", "ok");
  CHECK(r.kind != policy::outcome_kind::ok);
  ::signal(SIGPIPE, before);
}

TEST_CASE("mcp stdio source: a tool over 256 KiB is not kept in the list") {
  child_fixture f{{{"FAKE_MCP_BIG_TOOL", "1"}}, 1u << 20};
  // Its two others are (before, all three: the merged lists are copied
  // into every answer).
  CHECK(f.ready());
  std::this_thread::sleep_for(200ms);
  CHECK(f.src.view->read().tools->size() == 2);
}
