// Session tiers under a flood of distinct session ids: the runtime keeps at
// most `max_kept_sessions`, least recently used idle ones going first, and
// the memory they cost is bounded (virtual time: no TTL passes).

#include <chrono>
#include <fstream>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "sluice/runtime/runtime.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

// Resident set size of this process, in bytes.
size_t rss_bytes() {
  std::ifstream in{"/proc/self/statm"};
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

std::string id_of(size_t i) {
  auto s = std::to_string(i);
  return s + std::string(128 - s.size(), 'x'); // the longest id allowed
}

struct fixture : virtual_time_fixture {
  runtime rt{sys, runtime_config{}};
};

} // namespace

TEST_CASE_METHOD(fixture, "sessions: a flood of distinct ids keeps at most "
                          "max_kept_sessions tiers, in bounded memory") {
  for (size_t i = 0; i < runtime::max_kept_sessions; ++i)
    rt.session(id_of(i));
  run();
  CHECK(rt.kept_session_count() == runtime::max_kept_sessions);
  auto full = rss_bytes();
  auto actors_full = sys.registry().running();
  // Five times as many again: the count stays, so does the memory.
  for (size_t i = runtime::max_kept_sessions;
       i < 6 * runtime::max_kept_sessions; ++i) {
    rt.session(id_of(i));
    if (i % 1000 == 0)
      run(); // let dropped tiers' actors finish
  }
  run();
  CHECK(rt.kept_session_count() == runtime::max_kept_sessions);
  // Dropped tiers' actors are gone, not merely forgotten.
  CHECK(sys.registry().running() <= actors_full);
  auto grown = rss_bytes() - std::min(rss_bytes(), full);
  // 50,000 kept tiers would cost ~125 MB; the churn of a bounded set far
  // less (allocator slack only). Not under ASan: its quarantine holds freed
  // memory on purpose.
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(grown < 32u * 1024 * 1024);
#endif
  UNSCOPED_INFO("RSS at the cap: " << full / 1024 << " KiB, grown after 50k "
                                   "more ids: " << grown / 1024 << " KiB");
}

TEST_CASE_METHOD(fixture, "sessions: the least recently used idle session "
                          "goes first, a busy one never") {
  // Session 0 holds a permit (a call in flight); session 1 is used again
  // just before the cap is reached, so session 2 is the oldest idle one.
  auto busy = rt.session(id_of(0));
  REQUIRE(busy.counter->try_acquire());
  auto recent = rt.session(id_of(1)).owner;
  auto oldest = rt.session(id_of(2)).owner;
  for (size_t i = 3; i < runtime::max_kept_sessions; ++i)
    rt.session(id_of(i));
  CHECK(rt.session(id_of(1)).owner == recent); // used again: now the newest
  rt.session("one more"); // over the cap: the oldest idle one goes
  CHECK(rt.kept_session_count() == runtime::max_kept_sessions);
  CHECK(rt.session(id_of(0)).owner == busy.owner); // busy: kept
  CHECK(rt.session(id_of(1)).owner == recent);
  CHECK(rt.session(id_of(2)).owner != oldest); // dropped, made anew
  busy.counter->release();
  run();
}
