// Ejection limits: the ledger's share per route, and the breaker policy
// held closed when the ledger refuses.

#include "sluice/runtime/policy/breaker/ejection.hpp"

#include <chrono>
#include <cmath>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"
#include "sluice/runtime/policy/breaker/breaker_policy.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::testing::t0;

TEST_CASE("ejection ledger: a route's share of its sources may be out, the "
          "next is held") {
  ejection_ledger l;
  l.add_route("/r", {"a", "b", "c", "d"}, 50); // 2 of 4
  CHECK(l.try_eject("a"));
  CHECK(l.try_eject("b"));
  CHECK_FALSE(l.try_eject("c"));
  CHECK(l.held("c"));
  CHECK_FALSE(l.held("a"));
  auto v = l.routes();
  REQUIRE(v.size() == 1);
  CHECK(v[0].sources == 4);
  CHECK(v[0].ejected == 2);
  CHECK(v[0].allowed == 2);
  CHECK(v[0].held == std::vector<std::string>{"c"});
  // A slot frees: the held source may go out on its next failure.
  l.restored("a");
  CHECK(l.held("c"));
  CHECK(l.try_eject("c"));
  CHECK_FALSE(l.held("c"));
  // Asking again for a source already out is no new ejection.
  CHECK(l.try_eject("c"));
  CHECK(l.routes()[0].ejected == 2);
}

TEST_CASE("ejection ledger: other openings are counted, never refused - and "
          "a source on two routes obeys both") {
  ejection_ledger l;
  l.add_route("/one", {"a", "b"}, 50);       // 1 of 2
  l.add_route("/two", {"b", "c", "d"}, 100); // all 3
  l.ejected("a");                            // an operator isolated it
  CHECK_FALSE(l.try_eject("b"));             // /one is at its limit
  CHECK(l.held("b"));
  CHECK(l.try_eject("c")); // only on /two
  l.ejected("b");          // a peer node opened it: obeyed
  CHECK_FALSE(l.held("b"));
  for (auto& v : l.routes())
    if (v.route == "/one")
      CHECK(v.ejected == 2); // over the limit, by others' doing
  // A source on no limited route is never refused.
  CHECK(l.try_eject("z"));
}

TEST_CASE("ejection ledger: one source and a limit under 100 % never ejects "
          "it - bad limits are refused") {
  ejection_ledger l;
  l.add_route("/single", {"a"}, 99);
  CHECK_FALSE(l.try_eject("a"));
  l.add_route("/single", {"a"}, 100); // replaced
  CHECK(l.try_eject("a"));
  l.remove_route("/single");
  CHECK(l.routes().empty());
  CHECK_THROWS_WITH(l.add_route("/x", {"a"}, 101),
                    Catch::Contains("max_ejection_percent"));
  CHECK_THROWS_WITH(l.add_route("/x", {"a"}, std::nan("")),
                    Catch::Contains("max_ejection_percent"));
}

TEST_CASE("breaker policy: refused by the ejection limit it stays closed and "
          "held, and opens once allowed") {
  breaker_config c;
  c.window_size = 4;
  c.min_samples = 4;
  c.failure_rate_threshold = 0.5;
  breaker_policy b{c};
  bool allow = false;
  int asked = 0;
  auto may_open = [&] {
    ++asked;
    return allow;
  };
  for (int i = 0; i < 3; ++i)
    CHECK_FALSE(b.record(b.generation(), true, 10ms, t0, may_open));
  CHECK(asked == 0); // under min_samples: never asked
  CHECK_FALSE(b.record(b.generation(), true, 10ms, t0, may_open));
  CHECK(asked == 1);
  CHECK(b.state() == breaker_state::closed);
  CHECK(b.held());
  // Still failing, still refused; successes that bring the rate under the
  // threshold end the hold.
  CHECK_FALSE(b.record(b.generation(), true, 10ms, t0, may_open));
  CHECK(b.held());
  for (int i = 0; i < 3; ++i)
    b.record(b.generation(), false, 10ms, t0, may_open);
  CHECK_FALSE(b.held());
  CHECK(b.state() == breaker_state::closed);
  // Allowed now: the next verdict opens it.
  allow = true;
  std::optional<breaker_transition> t;
  for (int i = 0; i < 4 && !t; ++i)
    t = b.record(b.generation(), true, 10ms, t0, may_open);
  REQUIRE(t);
  CHECK(t->to == breaker_state::open);
  CHECK_FALSE(b.held());
}
