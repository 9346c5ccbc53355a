// The governor's phases: the one table of its moves (SPEC §3's loop).

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/call/governor_phase.hpp"

using namespace sluice::policy;
using p = governor_phase;

namespace {

const p all[] = {p::idle,        p::admitting, p::choosing, p::attempting,
                 p::backing_off, p::waiting,   p::finished};

} // namespace

TEST_CASE("governor phase: the loop's moves are allowed") {
  CHECK(may_enter(p::idle, p::admitting));
  CHECK(may_enter(p::admitting, p::choosing));
  CHECK(may_enter(p::admitting, p::finished));
  CHECK(may_enter(p::choosing, p::attempting));
  CHECK(may_enter(p::choosing, p::waiting));
  CHECK(may_enter(p::choosing, p::finished));
  CHECK(may_enter(p::attempting, p::backing_off));
  CHECK(may_enter(p::attempting, p::finished));
  CHECK(may_enter(p::backing_off, p::choosing));
  CHECK(may_enter(p::backing_off, p::finished));
  CHECK(may_enter(p::waiting, p::choosing));
}

TEST_CASE("governor phase: nothing leaves finished, nothing re-enters idle") {
  for (auto to : all) {
    CHECK_FALSE(may_enter(p::finished, to));
    CHECK_FALSE(may_enter(to, p::idle));
  }
}

TEST_CASE("governor phase: no phase is entered from itself") {
  for (auto x : all)
    CHECK_FALSE(may_enter(x, x));
}

TEST_CASE("governor phase: only admission and the stall check skip ahead") {
  // A call is never attempted before a round chose a source, and a wait
  // always ends in a new round (the stall check runs before the wait).
  CHECK_FALSE(may_enter(p::idle, p::finished));
  CHECK_FALSE(may_enter(p::admitting, p::attempting));
  CHECK_FALSE(may_enter(p::waiting, p::attempting));
  CHECK_FALSE(may_enter(p::waiting, p::finished));
  CHECK_FALSE(may_enter(p::backing_off, p::attempting));
  CHECK_FALSE(may_enter(p::attempting, p::choosing));
  CHECK_FALSE(may_enter(p::attempting, p::waiting));
}

TEST_CASE("governor phase: every phase has a name") {
  for (auto x : all)
    CHECK(to_string(x) != "?");
  CHECK(to_string(p::backing_off) == "backing_off");
}
