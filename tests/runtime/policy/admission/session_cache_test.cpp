// The sessions a runtime keeps: made on first use, kept while busy and for
// the idle TTL after, at most a cap (least recently used idle ones make
// room), in plain numbers.

#include "sluice/runtime/policy/admission/session_cache.hpp"

#include <chrono>
#include <string>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::policy;

namespace {

/// A stand-in for a session tier: busy while `calls` > 0.
struct fake_tier {
  int id = 0;
  int calls = 0;
};

struct cache_fixture {
  session_cache<fake_tier> cache{60s, 3, 2};
  time_point t0 = time_point{} + 1h;
  int made = 0;

  fake_tier& use(const std::string& id, duration at) {
    return cache.use(
        id, t0 + at, [this] { return fake_tier{++made, 0}; },
        [](const fake_tier& t) { return t.calls == 0; });
  }

  size_t sweep(duration at) {
    return cache.sweep(t0 + at,
                       [](const fake_tier& t) { return t.calls == 0; });
  }

  bool kept(const std::string& id) {
    bool found = false;
    cache.for_each([&](const std::string& k, const fake_tier&) {
      found = found || k == id;
    });
    return found;
  }
};

} // namespace

TEST_CASE_METHOD(cache_fixture,
                 "a session's entry is made once and reused") {
  auto& a = use("a", 0s);
  CHECK(a.id == 1);
  CHECK(use("a", 1s).id == 1);
  CHECK(made == 1);
  CHECK(cache.size() == 1);
}

TEST_CASE_METHOD(cache_fixture,
                 "an idle entry goes after the TTL from its last use, a "
                 "busy one never") {
  use("idle", 0s);
  use("busy", 0s).calls = 1;
  use("idle", 30s); // used again: its TTL starts over
  CHECK(sweep(60s) == 0);
  CHECK(sweep(89s) == 0);
  CHECK(sweep(90s) == 1);
  CHECK_FALSE(kept("idle"));
  CHECK(kept("busy"));
  CHECK(sweep(1h) == 0);
}

TEST_CASE_METHOD(cache_fixture,
                 "over the cap the least recently used idle entry makes "
                 "room") {
  use("a", 0s);
  use("b", 1s);
  use("c", 2s);
  use("a", 3s); // a is recent now; b is the oldest
  use("d", 4s);
  CHECK(cache.size() == 3);
  CHECK_FALSE(kept("b"));
  CHECK(kept("a"));
  CHECK(kept("c"));
  CHECK(kept("d"));
}

TEST_CASE_METHOD(cache_fixture,
                 "a busy entry is never dropped to make room, and the cap "
                 "may be passed after max_looks busy ones") {
  use("a", 0s).calls = 1;
  use("b", 1s).calls = 1;
  use("c", 2s);
  use("d", 3s);
  // Two looks (max_looks = 2) met only the busy a and b: nothing dropped.
  CHECK(cache.size() == 4);
  CHECK(kept("a"));
  CHECK(kept("b"));
  CHECK(kept("c"));
  // The busy ones moved to the back: the next new entry's two looks drop
  // the idle c and move the busy a back again. Over the cap still, by the
  // busy ones, as the NOTE says.
  use("e", 4s);
  CHECK_FALSE(kept("c"));
  CHECK(kept("a"));
  CHECK(kept("b"));
  CHECK(kept("d"));
  CHECK(cache.size() == 4);
  // Once they are idle, the next new entries bring it back to the cap.
  for (auto& id : {"a", "b"})
    use(id, 5s).calls = 0;
  use("f", 6s);
  CHECK(cache.size() == 3);
}
