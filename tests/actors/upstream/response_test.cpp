// The reply for an HTTP exchange that ended before its answer did: what the
// governor and, through it, the client are told, by how far it got.

#include "sluice/actors/upstream/response.hpp"

#include <catch2/catch.hpp>

using namespace sluice;
using policy::outcome_kind;
using upstream::failure_reply;

TEST_CASE("an exchange cut before any answer - the generic notes") {
  auto t = failure_reply(outcome_kind::timeout, 0, "");
  CHECK(t.kind == outcome_kind::timeout);
  CHECK(t.status == 0);
  CHECK(t.body == R"({"error":"upstream did not answer in time"})");
  auto u = failure_reply(outcome_kind::transient, 0, "");
  CHECK(u.kind == outcome_kind::transient);
  CHECK(u.body == R"({"error":"upstream unreachable"})");
}

TEST_CASE("an exchange cut inside its answer keeps the answer's status") {
  auto t = failure_reply(outcome_kind::timeout, 200, "");
  CHECK(t.status == 200);
  CHECK(t.body == R"({"error":"upstream went silent in its answer"})");
  auto u = failure_reply(outcome_kind::transient, 503, "ignored");
  CHECK(u.status == 503);
  CHECK(u.body == R"({"error":"upstream closed its answer early"})");
}

TEST_CASE("a setup failure's reason is the body - as JSON whatever it holds") {
  auto r = failure_reply(outcome_kind::transient, 0,
                         "upstream TLS certificate refused: \"bad\"\n\xff");
  CHECK(r.kind == outcome_kind::transient);
  // Quotes become apostrophes; control and non-ASCII bytes are dropped.
  CHECK(r.body == R"({"error":"upstream TLS certificate refused: 'bad'"})");
  CHECK(r.body.find('\n') == std::string::npos);
  CHECK(r.body.find('\xff') == std::string::npos);
}

TEST_CASE("a failure's reply says why in a few words, apart from its body") {
  using sluice::policy::outcome_kind;
  CHECK(sluice::upstream::failure_reply(outcome_kind::timeout, 0, "").reason ==
        "timeout: no answer");
  CHECK(sluice::upstream::failure_reply(outcome_kind::transient, 0, "")
            .reason == "unreachable");
  CHECK(sluice::upstream::failure_reply(outcome_kind::transient, 200, "")
            .reason == "closed: mid-answer");
  CHECK(sluice::upstream::failure_reply(outcome_kind::timeout, 200, "")
            .reason == "timeout: answer idle");
}
