#include "sluice/runtime/policy/redis_health.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;
using sluice::testing::t0;

namespace {

constexpr duration command_timeout = 200ms;
constexpr duration reconnect_after = 500ms;

} // namespace

// -- command_time -------------------------------------------------------------

TEST_CASE("a command without a deadline gets its whole timeout") {
  CHECK(command_time(200ms, std::nullopt, t0) == duration{200ms});
}

TEST_CASE("a nearer deadline shortens the command's wait") {
  CHECK(command_time(200ms, t0 + 50ms, t0) == duration{50ms});
  CHECK(command_time(200ms, t0 + 1s, t0) == duration{200ms});
}

TEST_CASE("a command whose deadline leaves less than 1 ms is not tried") {
  CHECK_FALSE(command_time(200ms, t0, t0).has_value());
  CHECK_FALSE(command_time(200ms, t0 - 1s, t0).has_value());
  CHECK_FALSE(command_time(200ms, t0 + 999us, t0).has_value());
  CHECK(command_time(200ms, t0 + 1ms, t0) == duration{1ms});
}

TEST_CASE("an unanswered command is a fault unless its deadline cut the wait "
          "below half a command timeout") {
  CHECK(unanswered_is_fault(200ms, 200ms));
  CHECK(unanswered_is_fault(100ms, 200ms));
  CHECK_FALSE(unanswered_is_fault(99ms, 200ms));
  CHECK_FALSE(unanswered_is_fault(1ms, 200ms));
}

// -- reconnect_pause ----------------------------------------------------------

TEST_CASE("a client connects at once until a connect fails") {
  reconnect_pause p{reconnect_after};
  CHECK(p.may_connect(t0));
  CHECK(p.may_connect(t0 + 24h));
}

TEST_CASE("after a failed connect none is tried for reconnect_after") {
  reconnect_pause p{reconnect_after};
  p.connect_failed(t0);
  CHECK_FALSE(p.may_connect(t0));
  CHECK_FALSE(p.may_connect(t0 + reconnect_after - 1ns));
  CHECK(p.may_connect(t0 + reconnect_after));
  CHECK(p.may_connect(t0 + 1h));
}

TEST_CASE("each failed connect starts the pause again") {
  reconnect_pause p{reconnect_after};
  p.connect_failed(t0);
  p.connect_failed(t0 + reconnect_after);
  CHECK_FALSE(p.may_connect(t0 + reconnect_after + 1ms));
  CHECK(p.may_connect(t0 + 2 * reconnect_after));
}

TEST_CASE("a successful connect ends the pause") {
  reconnect_pause p{reconnect_after};
  p.connect_failed(t0);
  p.connected();
  CHECK(p.may_connect(t0));
}

// -- redis_health -------------------------------------------------------------

TEST_CASE("a worker starts up and a fault marks it down once") {
  redis_health h{command_timeout, reconnect_after};
  CHECK_FALSE(h.down());
  CHECK_FALSE(h.probe_due(t0 + 1h));
  CHECK(h.fault(t0));
  CHECK(h.down());
  // A second fault is no new transition and does not move the probe.
  CHECK_FALSE(h.fault(t0 + 100ms));
  CHECK(h.probe_due() == t0 + reconnect_after);
}

TEST_CASE("no PING is due before reconnect_after has passed since the fault") {
  redis_health h{command_timeout, reconnect_after};
  h.fault(t0);
  CHECK_FALSE(h.probe_due(t0));
  CHECK_FALSE(h.probe_due(t0 + reconnect_after - 1ns));
  CHECK(h.probe_due(t0 + reconnect_after));
  CHECK(h.probe_due(t0 + 1h));
}

TEST_CASE("an unanswered PING puts the next one a full interval later") {
  redis_health h{command_timeout, reconnect_after};
  h.fault(t0);
  // It took a whole command timeout to go unanswered.
  auto known = t0 + reconnect_after + command_timeout;
  h.probe_failed(known);
  CHECK(h.down());
  CHECK_FALSE(h.probe_due(known + reconnect_after - 1ns));
  CHECK(h.probe_due(known + reconnect_after));
  CHECK(h.probe_due() == known + reconnect_after);
}

TEST_CASE("an answered PING marks the worker up once") {
  redis_health h{command_timeout, reconnect_after};
  h.fault(t0);
  CHECK(h.probe_answered());
  CHECK_FALSE(h.down());
  CHECK_FALSE(h.probe_answered()); // already up: no transition to log
  CHECK_FALSE(h.probe_due(t0 + 1h));
  // The next fault starts a new pause from its own time.
  CHECK(h.fault(t0 + 1h));
  CHECK(h.probe_due() == t0 + 1h + reconnect_after);
}

TEST_CASE("PINGs are at least 10 ms apart whatever reconnect_after says") {
  redis_health h{command_timeout, 1ns};
  CHECK(h.probe_interval() == min_probe_interval);
  h.fault(t0);
  CHECK_FALSE(h.probe_due(t0 + 9ms));
  CHECK(h.probe_due(t0 + 10ms));
  redis_health slow{command_timeout, 2s};
  CHECK(slow.probe_interval() == duration{2s});
}

TEST_CASE("a PING waits one command timeout") {
  redis_health h{command_timeout, reconnect_after};
  CHECK(h.probe_deadline(t0) == t0 + command_timeout);
}

TEST_CASE("a job whose deadline passed while it was queued is stale") {
  CHECK_FALSE(redis_health::stale(t0 + 1ns, t0));
  CHECK(redis_health::stale(t0, t0)); // exactly now: no time left to run
  CHECK(redis_health::stale(t0 - 1s, t0));
}

TEST_CASE("a job runs with its caller's deadline and at most one command "
          "timeout") {
  redis_health h{command_timeout, reconnect_after};
  CHECK(h.job_deadline(t0 + 50ms, t0) == t0 + 50ms);
  CHECK(h.job_deadline(t0 + 10s, t0) == t0 + command_timeout);
  CHECK(h.job_deadline(t0 + 10s, t0 + 1s) == t0 + 1s + command_timeout);
}
