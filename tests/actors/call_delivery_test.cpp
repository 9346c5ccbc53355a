// The two forms a governor delivers through: a response promise to the
// actor that sent `call_atom`, or `on_done` / `on_chunk` (callback form).

#include "sluice/actors/call_delivery.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>

#include <catch2/catch.hpp>

#include "sluice/messages/atoms.hpp"
#include "virtual_time.hpp"

using namespace sluice;

namespace {

// What the tests saw, shared with the actors under test.
struct seen {
  std::vector<call_result> done;
  std::vector<std::string> chunks;
  std::vector<call_result> replies;
};

// Stands in for a governor: opens on `call_atom`, streams each
// `stream_chunk_atom`'s bytes, closes on `status_atom` with an ok result.
caf::behavior delivering(caf::event_based_actor* self,
                         std::shared_ptr<seen> out, bool callback_form) {
  std::function<void(call_result)> on_done;
  std::function<void(std::string)> on_chunk;
  if (callback_form) {
    on_done = [out](call_result r) { out->done.push_back(std::move(r)); };
    on_chunk = [out](std::string b) { out->chunks.push_back(std::move(b)); };
  }
  auto delivery = std::make_shared<call_delivery>();
  delivery->start(self, std::move(on_done), std::move(on_chunk));
  return {
      [self, delivery](call_atom) { return delivery->open(self); },
      [self, delivery](stream_chunk_atom, std::string& bytes) {
        delivery->chunk(self, std::move(bytes));
      },
      [self, delivery](status_atom) {
        call_result r;
        r.source = "s";
        delivery->close(std::move(r));
        self->quit();
      },
  };
}

// The caller of a promise-form call: records chunks and the reply.
caf::behavior calling(caf::event_based_actor* self, caf::actor target,
                      std::shared_ptr<seen> out) {
  self->request(target, caf::infinite, call_atom_v)
      .then([out](call_result& r) { out->replies.push_back(std::move(r)); },
            [](caf::error&) {});
  return {
      [out](stream_chunk_atom, std::string& bytes) {
        out->chunks.push_back(std::move(bytes));
      },
  };
}

struct fixture : testing::virtual_time_fixture {
  std::shared_ptr<seen> out = std::make_shared<seen>();
};

} // namespace

TEST_CASE_METHOD(fixture, "call delivery: the promise form replies once, "
                          "chunks go to the caller first") {
  auto target = sys.spawn(delivering, out, false);
  auto caller = sys.spawn(calling, target, out);
  run();
  caf::anon_send(target, stream_chunk_atom_v, std::string{"ab"});
  caf::anon_send(target, stream_chunk_atom_v, std::string{"cd"});
  run();
  CHECK(out->chunks == std::vector<std::string>{"ab", "cd"});
  CHECK(out->replies.empty());
  caf::anon_send(target, status_atom_v);
  run();
  REQUIRE(out->replies.size() == 1);
  CHECK(out->replies[0].source == "s");
  CHECK(out->done.empty());
  caf::anon_send_exit(caller, caf::exit_reason::kill);
  run();
}

TEST_CASE_METHOD(fixture, "call delivery: the callback form calls on_chunk "
                          "and on_done once") {
  auto target = sys.spawn(delivering, out, true);
  caf::anon_send(target, call_atom_v);
  caf::anon_send(target, stream_chunk_atom_v, std::string{"x"});
  caf::anon_send(target, status_atom_v);
  target = nullptr;
  run();
  CHECK(out->chunks == std::vector<std::string>{"x"});
  REQUIRE(out->done.size() == 1);
  CHECK(out->done[0].ok());
  CHECK(out->done[0].source == "s");
}

TEST_CASE_METHOD(fixture, "call delivery: the callback form keeps its actor "
                          "alive until it closes") {
  auto target = sys.spawn(delivering, out, true);
  caf::actor_addr addr = target.address();
  caf::anon_send(target, call_atom_v);
  target = nullptr; // no reference left but the delivery's own
  run();
  auto again = caf::actor_cast<caf::actor>(addr);
  REQUIRE(again);
  caf::anon_send(again, status_atom_v);
  again = nullptr;
  run();
  REQUIRE(out->done.size() == 1);
  CHECK(out->done[0].ok());
  CHECK_FALSE(caf::actor_cast<caf::actor>(addr));
}

TEST_CASE_METHOD(fixture, "call delivery: a callback-form actor killed "
                          "before its result reports cancelled") {
  auto target = sys.spawn(delivering, out, true);
  caf::anon_send(target, call_atom_v);
  run();
  caf::anon_send_exit(target, caf::exit_reason::kill);
  target = nullptr;
  run();
  REQUIRE(out->done.size() == 1);
  CHECK(out->done[0].status == call_status::cancelled);
}

TEST_CASE_METHOD(fixture, "call delivery: a killed promise-form actor "
                          "calls nothing back") {
  auto target = sys.spawn(delivering, out, false);
  auto caller = sys.spawn(calling, target, out);
  run();
  caf::anon_send_exit(target, caf::exit_reason::kill);
  run();
  CHECK(out->done.empty());
  CHECK(out->replies.empty());
  caf::anon_send_exit(caller, caf::exit_reason::kill);
  run();
}
