// The access log's bounds (issue 30, finding 11): every field of a line is
// cut to its limit with a visible mark, a flood of refusals writes a
// sampled record with the count of what it left out, and the file can be
// rotated (rename + reopen, or copytruncate).

#include "sluice/runtime/node/access_log.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
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
  REQUIRE(std::rename(path.c_str(), old.c_str()) == 0);
  log.write(ok); // still the renamed file, as before a reopen
  CHECK(lines_of(old).size() == 2);
  REQUIRE(log.reopen());
  log.write(ok);
  CHECK(lines_of(old).size() == 2);
  CHECK(lines_of(path).size() == 1);
  // copytruncate: logrotate copies the file, then truncates it in place.
  REQUIRE(truncate(path.c_str(), 0) == 0);
  log.write(ok);
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
  CHECK_THROWS_WITH(access_log{path},
                    Catch::Contains("is not a regular file"));
  // A file replaced by a FIFO after the start: the reopen refuses it and
  // the log writes on to the file it had open.
  auto file = temp_path("fifo-reopen");
  std::remove(file.c_str());
  access_log log{file};
  REQUIRE(std::rename(path.c_str(), file.c_str()) == 0);
  CHECK_FALSE(log.reopen());
  std::remove(file.c_str());
}
