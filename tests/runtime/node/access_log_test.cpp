// The access log's bounds (issue 30, finding 11): every field of a line is
// cut to its limit with a visible mark, a flood of refusals writes a
// sampled record with the count of what it left out, and the file can be
// rotated (rename + reopen, or copytruncate). Lines are written by the
// log's own thread (issue 31, item 5): the caller only queues them, a full
// queue drops and counts, and neither a reopen nor the stop loses a line.

#include "sluice/runtime/node/access_log.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

using namespace sluice;
using namespace sluice::node;

namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/sluice-access-" + name + "-" + std::to_string(getpid()) + ".log";
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in{path};
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

access_record ok_line(std::string id) {
  access_record r;
  r.time = std::chrono::system_clock::now();
  r.request_id = std::move(id);
  r.method = "GET";
  r.path = "/healthz";
  r.status = 200;
  return r;
}

std::string id_of(const std::string& line) {
  return nlohmann::json::parse(line)["request_id"].get<std::string>();
}

/// Holds the writer in its `before_batch` hook until released, noting the
/// thread it runs on.
struct writer_gate {
  std::mutex mx;
  std::condition_variable cv;
  bool held = true;
  int entered = 0;
  std::thread::id writer;

  std::function<void()> hook() {
    return [this] {
      std::unique_lock<std::mutex> lock{mx};
      ++entered;
      writer = std::this_thread::get_id();
      cv.notify_all();
      cv.wait(lock, [&] { return !held; });
    };
  }
  /// Bounded: false if the writer never took a batch.
  bool wait_entered() {
    std::unique_lock<std::mutex> lock{mx};
    return cv.wait_for(lock, std::chrono::seconds{10},
                       [&] { return entered > 0; });
  }
  void release() {
    std::lock_guard<std::mutex> guard{mx};
    held = false;
    cv.notify_all();
  }
};

access_record refusal(std::string path) {
  access_record r;
  r.time = std::chrono::system_clock::now();
  r.request_id = "r1";
  r.method = "GET";
  r.path = std::move(path);
  r.status = 401;
  r.error = "invalid_api_key";
  return r;
}

} // namespace

TEST_CASE("access log: a long field is cut with a mark naming the bytes "
          "left out, never inside a UTF-8 character") {
  CHECK(cut_field("short", 8) == "short");
  CHECK(cut_field(std::string(300, 'a'), 256) ==
        std::string(256, 'a') + "\u2026[cut 44 bytes]");
  // "é" is two bytes; a cut after 3 bytes of "aaé" would split it.
  CHECK(cut_field("aa\xc3\xa9zz", 3) == "aa\u2026[cut 4 bytes]");
}

TEST_CASE("access log: a line with huge fields stays bounded and valid "
          "JSON") {
  auto r = refusal("/" + std::string(7000, 'x'));
  r.model = std::string(5000, 'm');
  r.method = std::string(100, 'G');
  r.request_id = std::string(1000, 'i');
  r.key = std::string(1000, 'k');
  r.source = std::string(1000, 's');
  r.error = std::string(1000, '\x01'); // escaped as \u0001: 6 bytes each
  auto line = access_line(r);
  CHECK(line.size() <= max_access_line_bytes);
  auto doc = nlohmann::json::parse(line);
  auto path = doc["path"].get<std::string>();
  CHECK(path.size() < max_logged_path_bytes + 32);
  CHECK(path.find("[cut 6745 bytes]") != std::string::npos);
  CHECK(doc["model"].get<std::string>().find("[cut 4872 bytes]") !=
        std::string::npos);
  CHECK_FALSE(doc.contains("suppressed"));
}

TEST_CASE("access log: a flood of unauthenticated refusals writes at most "
          "the sampler's burst, and the next line counts the rest") {
  auto path = temp_path("flood");
  std::remove(path.c_str());
  {
    access_log log{path};
    for (int i = 0; i < 5000; ++i)
      log.write(refusal("/" + std::string(7000, 'x')));
    CHECK(log.suppressed_total() >= 5000 - policy::refusal_lines_burst - 100);
    access_record ok;
    ok.method = "GET";
    ok.path = "/healthz";
    ok.status = 200;
    log.write(ok);
  }
  auto lines = lines_of(path);
  // The burst (and what the rate refilled while the loop ran), then the
  // 200 carrying the count.
  REQUIRE(lines.size() >= policy::refusal_lines_burst + 1);
  CHECK(lines.size() < 5000 / 4);
  uint64_t suppressed = 0;
  for (auto& line : lines) {
    CHECK(line.size() <= max_access_line_bytes);
    auto doc = nlohmann::json::parse(line);
    if (doc.contains("suppressed"))
      suppressed += doc["suppressed"].get<uint64_t>();
  }
  CHECK(nlohmann::json::parse(lines.back())["status"] == 200);
  CHECK(suppressed + lines.size() - 1 == 5000);
  std::remove(path.c_str());
}

TEST_CASE("access log: reopen after a rename writes to a new file at the "
          "path, and copytruncate needs no reopen") {
  auto path = temp_path("rotate");
  auto old = path + ".1";
  std::remove(path.c_str());
  std::remove(old.c_str());
  access_record ok;
  ok.method = "GET";
  ok.path = "/healthz";
  ok.status = 200;
  access_log log{path};
  log.write(ok);
  log.flush();
  REQUIRE(std::rename(path.c_str(), old.c_str()) == 0);
  log.write(ok); // still the renamed file, as before a reopen
  log.flush();
  CHECK(lines_of(old).size() == 2);
  REQUIRE(log.reopen());
  log.write(ok);
  log.flush();
  CHECK(lines_of(old).size() == 2);
  CHECK(lines_of(path).size() == 1);
  // copytruncate: logrotate copies the file, then truncates it in place.
  REQUIRE(truncate(path.c_str(), 0) == 0);
  log.write(ok);
  log.flush();
  std::ifstream in{path, std::ios::binary};
  std::string all{std::istreambuf_iterator<char>{in}, {}};
  // Appending: the line is at the start, no hole of zero bytes before it.
  REQUIRE_FALSE(all.empty());
  CHECK(all.front() == '{');
  CHECK(lines_of(path).size() == 1);
  std::remove(path.c_str());
  std::remove(old.c_str());
}

TEST_CASE("access log: a FIFO is refused at once, at the start and on a "
          "reopen, instead of blocking until someone reads it") {
  auto path = temp_path("fifo");
  std::remove(path.c_str());
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(access_log{path}, Catch::Contains("is not a regular file"));
  // A file replaced by a FIFO after the start: the reopen refuses it and
  // the log writes on to the file it had open.
  auto file = temp_path("fifo-reopen");
  std::remove(file.c_str());
  access_log log{file};
  REQUIRE(std::rename(path.c_str(), file.c_str()) == 0);
  CHECK_FALSE(log.reopen());
  std::remove(file.c_str());
}

TEST_CASE("access log: write returns without writing - the log's own "
          "thread writes, while the caller goes on") {
  auto path = temp_path("off-thread");
  std::remove(path.c_str());
  writer_gate gate;
  access_log_options opts;
  opts.flush_interval = std::chrono::milliseconds{10};
  opts.before_batch = gate.hook();
  {
    access_log log{path, opts};
    log.write(ok_line("first"));
    // The writer took "first" and is held before writing it.
    REQUIRE(gate.wait_entered());
    for (int i = 0; i < 100; ++i)
      log.write(ok_line("held-" + std::to_string(i)));
    // Each write returned although the writer cannot write: nothing of
    // them (nor "first") is in the file.
    CHECK(lines_of(path).empty());
    CHECK(gate.writer != std::this_thread::get_id());
    gate.release();
    log.flush();
    CHECK(lines_of(path).size() == 101);
  }
  std::remove(path.c_str());
}

TEST_CASE("access log: a line is written within the flush interval, "
          "without a flush or the stop") {
  auto path = temp_path("interval");
  std::remove(path.c_str());
  access_log_options opts;
  opts.flush_interval = std::chrono::milliseconds{50};
  access_log log{path, opts};
  log.write(ok_line("soon"));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (lines_of(path).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  REQUIRE(lines_of(path).size() == 1);
  CHECK(id_of(lines_of(path).front()) == "soon");
  std::remove(path.c_str());
}

TEST_CASE("access log: lines from several threads all arrive, each "
          "thread's in its order, once the log is destroyed") {
  auto path = temp_path("threads");
  std::remove(path.c_str());
  constexpr int threads = 4;
  constexpr int per_thread = 5000;
  {
    access_log_options opts;
    opts.flush_interval = std::chrono::milliseconds{5};
    access_log log{path, opts};
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t)
      writers.emplace_back([&log, t] {
        for (int i = 0; i < per_thread; ++i)
          log.write(ok_line(std::to_string(t) + "-" + std::to_string(i)));
      });
    for (auto& w : writers)
      w.join();
    CHECK(log.dropped_total() == 0);
  } // no flush: the destructor writes what is queued
  auto lines = lines_of(path);
  REQUIRE(lines.size() == threads * per_thread);
  std::vector<int> next(threads, 0);
  bool in_order = true;
  for (auto& line : lines) {
    auto id = id_of(line);
    auto dash = id.find('-');
    auto t = std::stoi(id.substr(0, dash));
    auto i = std::stoi(id.substr(dash + 1));
    in_order = in_order && i == next[t];
    next[t] = i + 1;
  }
  CHECK(in_order);
  for (int t = 0; t < threads; ++t)
    CHECK(next[t] == per_thread);
  std::remove(path.c_str());
}

TEST_CASE("access log: a full queue drops the line and counts it, and "
          "the caller never waits for room") {
  auto path = temp_path("full");
  std::remove(path.c_str());
  writer_gate gate;
  access_log_options opts;
  opts.max_queued_lines = 8;
  opts.flush_interval = std::chrono::milliseconds{10};
  opts.before_batch = gate.hook();
  {
    access_log log{path, opts};
    log.write(ok_line("taken"));
    REQUIRE(gate.wait_entered()); // "taken" is out of the queue
    for (int i = 0; i < 20; ++i)
      log.write(ok_line("q-" + std::to_string(i)));
    // 8 fit; 12 are dropped, while the writer is still held.
    CHECK(log.dropped_total() == 12);
    gate.release();
    log.flush();
    CHECK(log.dropped_total() == 12);
    log.write(ok_line("after")); // room again
  }
  auto lines = lines_of(path);
  REQUIRE(lines.size() == 1 + 8 + 1);
  CHECK(id_of(lines[0]) == "taken");
  for (int i = 0; i < 8; ++i)
    CHECK(id_of(lines[1 + i]) == "q-" + std::to_string(i));
  CHECK(id_of(lines.back()) == "after");
  std::remove(path.c_str());
}

TEST_CASE("access log: a reopen while lines are queued loses none - "
          "those before it go to the old file, the later ones to the new") {
  auto path = temp_path("reopen-queued");
  auto old = path + ".1";
  std::remove(path.c_str());
  std::remove(old.c_str());
  writer_gate gate;
  access_log_options opts;
  opts.flush_interval = std::chrono::milliseconds{10};
  opts.before_batch = gate.hook();
  {
    access_log log{path, opts};
    log.write(ok_line("a"));
    REQUIRE(gate.wait_entered()); // "a" taken, not written yet
    log.write(ok_line("b"));
    log.write(ok_line("c"));
    REQUIRE(std::rename(path.c_str(), old.c_str()) == 0);
    REQUIRE(log.reopen());
    log.write(ok_line("d"));
    log.write(ok_line("e"));
    gate.release();
  } // the stop writes the rest
  auto before = lines_of(old);
  auto after = lines_of(path);
  REQUIRE(before.size() == 3);
  REQUIRE(after.size() == 2);
  CHECK(id_of(before[0]) == "a");
  CHECK(id_of(before[1]) == "b");
  CHECK(id_of(before[2]) == "c");
  CHECK(id_of(after[0]) == "d");
  CHECK(id_of(after[1]) == "e");
  std::remove(path.c_str());
  std::remove(old.c_str());
}

TEST_CASE("access log: off starts no writer and counts nothing") {
  access_log log{"off"};
  CHECK_FALSE(log.enabled());
  log.write(ok_line("x"));
  log.flush();
  CHECK(log.reopen());
  CHECK(log.dropped_total() == 0);
}

TEST_CASE("access log: a cleared record is a new one, its strings keeping "
          "their room") {
  access_record r;
  r.time = std::chrono::system_clock::now();
  r.request_id = std::string(32, 'a');
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.model = "gpt-4o-mini";
  r.key = "team-a";
  r.status = 429;
  r.error = "tool_busy";
  r.source = "primary";
  r.attempts = 3;
  r.hedged = 1;
  r.won_attempt = 2;
  r.total = std::chrono::milliseconds{20};
  r.upstream = std::chrono::milliseconds{15};
  r.suppressed = 7;
  auto room = r.request_id.capacity();
  clear_record(r);
  CHECK(access_line(r) == access_line(access_record{}));
  CHECK(r.request_id.capacity() == room);
}

TEST_CASE("access log: a call's tokens, cost and whether they were "
          "estimated") {
  access_record r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.status = 200;
  auto plain = nlohmann::json::parse(access_line(r));
  CHECK_FALSE(plain.contains("prompt_tokens")); // not read: not written
  r.usage = policy::token_usage{};
  r.usage->prompt = 1200;
  r.usage->completion = 30;
  r.usage->cached_prompt = 1000;
  r.cost = policy::money{625'000};
  auto doc = nlohmann::json::parse(access_line(r));
  CHECK(doc["prompt_tokens"] == 1200);
  CHECK(doc["completion_tokens"] == 30);
  CHECK(doc["cached_tokens"] == 1000);
  CHECK(doc["usage_estimated"] == false);
  CHECK(doc["cost_usd"].get<double>() == Approx(0.00625));
  r.cost.reset();
  r.usage->estimated = true;
  doc = nlohmann::json::parse(access_line(r));
  CHECK(doc["usage_estimated"] == true);
  CHECK(doc["cost_usd"].is_null());
  clear_record(r);
  CHECK_FALSE(r.usage);
  CHECK_FALSE(r.cost);
}
