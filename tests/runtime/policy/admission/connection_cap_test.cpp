// The client connection cap under the descriptor limit, and the order in
// which idle connections make room at it (issue 30, finding 7).

#include "sluice/runtime/policy/admission/connection_cap.hpp"

#include <catch2/catch.hpp>

using namespace sluice::policy;

TEST_CASE("the connection cap fits under the descriptor limit") {
  // The red team's node: 1024 descriptors, max_connections 10000 -- idle
  // clients took every descriptor. Now a quarter is kept back.
  CHECK(fd_reserve(1024) == 256);
  CHECK(connection_cap(10000, 1024, 0) == 768);
  // With the admin listener, its slots are kept back too.
  CHECK(connection_cap(10000, 1024, 64) == 704);
  // A low limit keeps at least fd_reserve_min back.
  CHECK(fd_reserve(128) == fd_reserve_min);
  CHECK(connection_cap(10000, 256, 0) == 256 - 64);
  // A configured cap below the room is kept as it is.
  CHECK(connection_cap(100, 1 << 20, 64) == 100);
  // Unknown limit: the configured cap.
  CHECK(connection_cap(10000, 0, 64) == 10000);
  // Absurdly low limits still serve someone.
  CHECK(connection_cap(10000, 16, 64) == min_connection_cap);
  CHECK(connection_cap(3, 16, 64) == 3);
}

TEST_CASE("idle connections make room oldest first, busy ones never") {
  idle_order<int> order;
  CHECK_FALSE(order.take_oldest());
  order.idle(1);
  order.idle(2);
  order.idle(3);
  CHECK(order.size() == 3);
  // 1's next request began: it is not idle, so it cannot be shed.
  order.busy(1);
  CHECK_FALSE(order.contains(1));
  // 2 served a request and waits again: now the most recent.
  order.busy(2);
  order.idle(2);
  CHECK(order.take_oldest() == 3);
  CHECK(order.take_oldest() == 2);
  CHECK_FALSE(order.take_oldest());
  // Leaving twice, or leaving without having been idle, is harmless.
  order.busy(7);
  order.idle(7);
  order.idle(7);
  CHECK(order.size() == 1);
  order.busy(7);
  order.busy(7);
  CHECK(order.size() == 0);
}

TEST_CASE("idle and busy again reuse their nodes - bounded, order kept") {
  idle_order<int> order;
  // Many connections idle at once, then all busy: the spares stop at
  // their bound.
  for (int i = 0; i < 200; ++i)
    order.idle(i);
  for (int i = 0; i < 200; ++i)
    order.busy(i);
  CHECK(order.size() == 0);
  CHECK(order.spares() == 2 * idle_order<int>::spare_nodes);
  // Reused nodes carry the new ids, in order.
  for (int i = 300; i < 310; ++i)
    order.idle(i);
  CHECK(order.spares() == 2 * idle_order<int>::spare_nodes - 20);
  order.busy(305);
  order.idle(305);
  for (int i = 300; i < 310; ++i)
    if (i != 305)
      CHECK(order.take_oldest() == i);
  CHECK(order.take_oldest() == 305);
  CHECK_FALSE(order.take_oldest());
  CHECK_FALSE(order.contains(305));
}

TEST_CASE("at the cap a new connection sheds an idle one, unless too many "
          "closes are under way") {
  CHECK(admit_connection(0, 8) == admission::serve);
  CHECK(admit_connection(7, 8) == admission::serve);
  CHECK(admit_connection(8, 8) == admission::shed_idle);
  CHECK(admit_connection(8 + max_cap_overshoot - 1, 8) == admission::shed_idle);
  CHECK(admit_connection(8 + max_cap_overshoot, 8) == admission::refuse);
}
