#include "sluice/actors/permit.hpp"

#include <caf/abstract_actor.hpp>
#include <caf/actor.hpp>
#include <caf/attachable.hpp>
#include <caf/send.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/admission/tier_counter.hpp"

namespace sluice {

namespace {

// Selects one permit among the attachables of a holder.
struct permit_key {
  const policy::tier_counter* counter;
  permit_id id;

  bool operator==(const permit_key& other) const noexcept {
    return counter == other.counter && id == other.id;
  }
};

// Token subtype for permits; CAF uses 0..3 for its own attachables.
constexpr size_t permit_token = 0x51CE;

// Gives a permit back and wakes the owner if callers are queued for it.
void give_back(policy::tier_counter& counter, const caf::actor& owner) {
  if (counter.release())
    caf::anon_send(owner, wake_atom_v);
}

class permit_observer final : public caf::attachable {
public:
  permit_observer(std::shared_ptr<policy::tier_counter> counter,
                  caf::actor owner, permit_id id)
      : counter_(std::move(counter))
      , owner_(std::move(owner))
      , id_(id) {
    // nop
  }

  // Runs exactly once if the holder terminates while holding the permit.
  void actor_exited(const caf::error&, caf::execution_unit*) override {
    give_back(*counter_, owner_);
  }

  bool matches(const token& what) override {
    return what.subtype == permit_token &&
           *static_cast<const permit_key*>(what.ptr) ==
               permit_key{counter_.get(), id_};
  }

private:
  std::shared_ptr<policy::tier_counter> counter_;
  caf::actor owner_;
  permit_id id_;
};

} // namespace

void attach_permit(caf::abstract_actor* holder,
                   std::shared_ptr<policy::tier_counter> counter,
                   caf::actor owner, permit_id id) {
  // attach() on a terminated actor runs actor_exited() immediately, so a
  // permit granted to a holder that died in the meantime is returned at once.
  holder->attach(caf::attachable_ptr{
      new permit_observer(std::move(counter), std::move(owner), id)});
}

bool release_permit(caf::abstract_actor* holder, policy::tier_counter& counter,
                    const caf::actor& owner, permit_id id) {
  // Detaching under the holder's lock decides who returns the permit: either
  // we remove the observer here, or termination already took it and runs it.
  permit_key key{&counter, id};
  if (holder->detach(caf::attachable::token{permit_token, &key}) == 0)
    return false;
  give_back(counter, owner);
  return true;
}

} // namespace sluice
