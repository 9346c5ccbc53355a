// The built-in sources' book of attempts in flight: by id and by requester,
// each requester monitored while it has an attempt, so a requester that
// terminates has its attempts found (and only those still in flight).

#include "sluice/actors/attempt_book.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <catch2/catch.hpp>

#include "virtual_time.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

using add_atom = caf::atom_constant<caf::atom("add")>;
using take_atom = caf::atom_constant<caf::atom("take")>;

struct entry {
  caf::actor_addr requester;
};

/// What the book's owner saw: ids taken, ids dropped with their requester.
struct book_report {
  std::vector<uint64_t> taken;
  std::vector<uint64_t> missing;
  std::vector<uint64_t> dropped;
};

struct owner_state {
  attempt_book<entry> book;
};

caf::behavior owner(caf::stateful_actor<owner_state>* self,
                    std::shared_ptr<book_report> rep) {
  self->set_down_handler([self, rep](caf::down_msg& dm) {
    for (auto id : self->state.book.drop_requester(dm.source))
      rep->dropped.push_back(id);
  });
  return {
      [self](add_atom, uint64_t id, caf::actor requester) {
        self->state.book.add(self, id, entry{requester.address()});
      },
      [self](add_atom, uint64_t id) {
        self->state.book.add(self, id, entry{});
      },
      [self, rep](take_atom, uint64_t id) {
        if (self->state.book.take(self, id))
          rep->taken.push_back(id);
        else
          rep->missing.push_back(id);
      },
  };
}

struct book_fixture : virtual_time_fixture {
  std::shared_ptr<book_report> rep = std::make_shared<book_report>();
  caf::actor book = sys.spawn(owner, rep);

  caf::actor requester() {
    return sys.spawn([] { return caf::behavior{[](int) {}}; });
  }

  void kill(const caf::actor& a) {
    caf::anon_send_exit(a, caf::exit_reason::kill);
    run();
  }

  ~book_fixture() override {
    caf::anon_send_exit(book, caf::exit_reason::user_shutdown);
    run();
  }
};

std::vector<uint64_t> sorted(std::vector<uint64_t> xs) {
  std::sort(xs.begin(), xs.end());
  return xs;
}

} // namespace

TEST_CASE_METHOD(book_fixture,
                 "a requester that terminates has its attempts dropped, "
                 "only those still in flight") {
  auto r = requester();
  auto other = requester();
  caf::anon_send(book, add_atom::value, uint64_t{1}, r);
  caf::anon_send(book, add_atom::value, uint64_t{2}, r);
  caf::anon_send(book, add_atom::value, uint64_t{3}, r);
  caf::anon_send(book, add_atom::value, uint64_t{4}, other);
  caf::anon_send(book, take_atom::value, uint64_t{2});
  run();
  CHECK(rep->taken == std::vector<uint64_t>{2});
  kill(r);
  // Taking one attempt removed one monitor, not the requester's others.
  CHECK(sorted(rep->dropped) == std::vector<uint64_t>{1, 3});
  kill(other);
  CHECK(sorted(rep->dropped) == std::vector<uint64_t>{1, 3, 4});
}

TEST_CASE_METHOD(book_fixture,
                 "a requester whose attempts were all answered is not "
                 "reported when it terminates") {
  auto r = requester();
  caf::anon_send(book, add_atom::value, uint64_t{1}, r);
  caf::anon_send(book, add_atom::value, uint64_t{2}, r);
  caf::anon_send(book, take_atom::value, uint64_t{1});
  caf::anon_send(book, take_atom::value, uint64_t{2});
  run();
  kill(r);
  CHECK(rep->dropped.empty());
}

TEST_CASE_METHOD(book_fixture,
                 "an attempt dropped with its requester cannot be taken "
                 "afterwards") {
  auto r = requester();
  caf::anon_send(book, add_atom::value, uint64_t{7}, r);
  run();
  kill(r);
  caf::anon_send(book, take_atom::value, uint64_t{7});
  run();
  CHECK(rep->dropped == std::vector<uint64_t>{7});
  CHECK(rep->missing == std::vector<uint64_t>{7});
  CHECK(rep->taken.empty());
}

TEST_CASE_METHOD(book_fixture,
                 "an anonymous attempt is kept and taken without a monitor") {
  caf::anon_send(book, add_atom::value, uint64_t{9});
  caf::anon_send(book, take_atom::value, uint64_t{9});
  caf::anon_send(book, take_atom::value, uint64_t{9});
  run();
  CHECK(rep->taken == std::vector<uint64_t>{9});
  CHECK(rep->missing == std::vector<uint64_t>{9});
}
