// Reading the files a config names (issue 30, findings 5 and 6): only a
// regular file, never blocking on a FIFO or a device, bounded, and never a
// file caught half-written -- a writer is played by the read's test hooks.

#include "sluice/runtime/config/file_snapshot.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/runtime/config/secret.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/config_file.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::config::read_file_snapshot;

namespace {

struct scratch {
  std::string dir = "/tmp/sluice-snapshot-" + std::to_string(getpid());
  scratch() { ::mkdir(dir.c_str(), 0700); }
  ~scratch() {
    for (auto name : {"f", "link", "fifo", "big", "secret", "cfg.toml"})
      std::remove((dir + "/" + name).c_str());
    ::rmdir(dir.c_str());
  }
  std::string path(const std::string& name) const { return dir + "/" + name; }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream{path(name), std::ios::binary | std::ios::trunc} << text;
    return path(name);
  }
  std::string fifo() const {
    auto p = path("fifo");
    std::remove(p.c_str());
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    return p;
  }
};

// The message `read_file_snapshot` refuses `path` with, and how long it
// took ("" if it read it).
std::string refusal(const std::string& path, size_t limit,
                    std::chrono::milliseconds* took = nullptr,
                    const config::file_read_hooks& hooks = {}) {
  auto start = std::chrono::steady_clock::now();
  std::string out;
  try {
    read_file_snapshot(path, limit, hooks);
  } catch (const std::invalid_argument& e) {
    out = e.what();
  }
  if (took != nullptr)
    *took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string routes = "[sources.a]\ntype = \"simulated\"\n"
                           "[routes.\"/r\"]\nsources = [\"a\"]\n";

} // namespace

TEST_CASE("a config file is read whole, also through a symlink",
          "[config][files]") {
  scratch s;
  auto f = s.write("f", "hello\n");
  CHECK(read_file_snapshot(f, 100) == "hello\n");
  REQUIRE(::symlink(f.c_str(), s.path("link").c_str()) == 0);
  CHECK(read_file_snapshot(s.path("link"), 100) == "hello\n");
  CHECK(read_file_snapshot(s.write("f", ""), 100).empty());
}

TEST_CASE("a FIFO, a directory, a device and a file over the limit are "
          "refused at once, saying what they are",
          "[config][files]") {
  scratch s;
  std::chrono::milliseconds took{};
  // Nothing writes to the FIFO: a blocking open would never return.
  auto fifo = refusal(s.fifo(), 4096, &took);
  CHECK(has(fifo, "is a FIFO, not a regular file"));
  CHECK(took < 1s);
  CHECK(has(refusal(s.dir, 4096), "is a directory, not a regular file"));
  CHECK(has(refusal("/dev/zero", 4096, &took),
            "is a character device, not a regular file"));
  CHECK(took < 1s);
  CHECK(has(refusal(s.write("big", std::string(4097, 'x')), 4096),
            "is larger than 4096 bytes"));
  CHECK(read_file_snapshot(s.write("big", std::string(4096, 'x')), 4096)
            .size() == 4096);
  CHECK(has(refusal(s.path("missing"), 4096), "cannot read"));
}

TEST_CASE("a file rewritten between the two reads is read again, and what "
          "is returned is what the file holds once settled",
          "[config][files]") {
  scratch s;
  auto f = s.write("f", "a complete file\n");
  int writes = 0;
  config::file_read_hooks hooks;
  // An in-place rewrite caught half-way: truncated, part of it written.
  hooks.between_reads = [&] {
    if (writes++ == 0)
      s.write("f", "a comp");
  };
  CHECK(read_file_snapshot(f, 100, hooks) == "a comp");
  CHECK(writes >= 2); // a second pair of reads agreed on it
}

TEST_CASE("a file written during each read, or between each pair of "
          "reads, is refused with the advice to rename",
          "[config][files]") {
  scratch s;
  auto f = s.write("f", "x");
  std::string text = "x";
  auto grow = [&] { s.write("f", text += "x"); };
  for (int hook = 0; hook < 2; ++hook) {
    INFO("hook " << hook);
    config::file_read_hooks hooks;
    (hook == 0 ? hooks.after_read : hooks.between_reads) = grow;
    std::chrono::milliseconds took{};
    auto why = refusal(f, 1000, &took, hooks);
    CHECK(has(why, "the file changed while it was read; write a new file "
                   "and rename it over the old one"));
    // Bounded: `file_read_tries` pairs, each at most one settle time
    // (~0.25 s; the margin is for a loaded machine).
    CHECK(took < 2s);
  }
}

TEST_CASE("a FIFO or a directory named as the config or as a secret is "
          "refused at once, naming the key and line",
          "[config][files]") {
  scratch s;
  auto fifo = s.fifo();
  for (auto path : {fifo, s.dir}) {
    INFO(path);
    try {
      load_config_file(path);
      FAIL("loaded " << path);
    } catch (const config_error& e) {
      CHECK(e.key() == "file");
      CHECK(has(e.what(), "not a regular file"));
    }
    auto cfg = s.write("cfg.toml", "[auth]\nallow_anonymous = true\n"
                                   "admin_key = \"file:" +
                                       path + "\"\n" + routes);
    try {
      load_config_file(cfg);
      FAIL("loaded a secret from " << path);
    } catch (const config_error& e) {
      CHECK(e.key() == "auth.admin_key");
      CHECK(e.line() == 3);
      CHECK(has(e.what(), "not a regular file"));
    }
  }
  auto cfg = s.write("cfg.toml", "[auth]\nadmin_key = \"file:/dev/zero\"\n" +
                                     routes);
  CHECK_THROWS_WITH(load_config_file(cfg),
                    Catch::Contains("line 2: auth.admin_key") &&
                        Catch::Contains("a character device"));
  // Over the limits: a secret file, a config file.
  s.write("secret", std::string(secret_file_bytes_limit + 1, 'k'));
  cfg = s.write("cfg.toml", "[auth]\nadmin_key = \"file:" +
                                s.path("secret") + "\"\n" + routes);
  CHECK_THROWS_WITH(load_config_file(cfg),
                    Catch::Contains("line 2: auth.admin_key") &&
                        Catch::Contains("is larger than 4098 bytes"));
  auto big = s.write("big", std::string(16 << 20, '#') + "\n");
  CHECK_THROWS_WITH(load_config_file(big),
                    Catch::StartsWith("file: ") &&
                        Catch::Contains("is larger than 16777216 bytes"));
  // A secret file: the secret and a line ending at most.
  s.write("secret", std::string(secret_file_limit, 'k') + "\r\n");
  CHECK(read_secret("file:" + s.path("secret")).size() == secret_file_limit);
  s.write("secret", std::string(secret_file_limit + 3, 'k'));
  CHECK_THROWS_WITH(read_secret("file:" + s.path("secret")),
                    Catch::Contains("is larger than"));
}
