#include "sluice/actors/admission.hpp"

#include <functional>
#include <memory>
#include <utility>

#include <caf/event_based_actor.hpp>

#include "sluice/actors/permit.hpp"
#include "sluice/messages/atoms.hpp"

namespace sluice {

const tier_handle& admission_path::operator[](tier_kind k) const noexcept {
  switch (k) {
  case tier_kind::session:
    return session;
  case tier_kind::connection:
    return connection;
  default:
    return global;
  }
}

void admission_ticket::release(caf::abstract_actor* holder) noexcept {
  // Most global first: the tier with the most contention gets its permit
  // back soonest.
  for (auto i = permits_.rbegin(); i != permits_.rend(); ++i) {
    if (auto& p = *i) {
      release_permit(holder, *p->tier.counter, p->tier.owner, p->id);
      p.reset();
    }
  }
}

bool admission_ticket::holds(tier_kind k) const noexcept {
  for (auto& p : permits_)
    if (p && p->tier.kind == k)
      return true;
  return false;
}

size_t admission_ticket::held() const noexcept {
  size_t n = 0;
  for (auto& p : permits_)
    n += p.has_value() ? 1 : 0;
  return n;
}

void admission_ticket::add(size_t step, const tier_handle& tier,
                           permit_id id) {
  permits_[step] = held_permit{tier, id};
}

namespace {

// One admission in progress; shared by the continuations of its requests and
// dropped with them if the holder terminates.
struct admission_attempt : admission_progress {
  /// The path's tiers in acquisition order: session, group (if any),
  /// connection, global.
  std::array<tier_handle, max_admission_steps> steps;
  size_t step_count = 0;
  admission_callback done;

  void plan(const admission_path& path, time_point deadline) {
    ticket_.set_deadline(deadline);
    steps[step_count++] = path.session;
    if (path.group)
      steps[step_count++] = *path.group;
    steps[step_count++] = path.connection;
    steps[step_count++] = path.global;
  }

  admission_ticket& ticket() { return ticket_; }

  void took(size_t step, permit_id id) {
    waiting_on_.reset();
    ticket_.add(step, steps[step], id);
  }

  void queued_at(tier_kind k) { waiting_on_ = k; }

  void succeed() { finish(std::move(ticket_)); }

  void fail(caf::event_based_actor* self, caf::error err) {
    ticket_.release(self);
    finish(std::move(err));
  }

private:
  void finish(caf::expected<admission_ticket> outcome) {
    waiting_on_.reset();
    finished_ = true;
    auto f = std::move(done);
    f(std::move(outcome));
  }
};

// Takes, without a message, the permit of each tier of `steps` from `step`
// on while one is free and nobody is queued for it; returns the first step
// that must wait (`count`: none).
template <class Tier>
size_t take_free(caf::event_based_actor* self, const Tier* steps, size_t count,
                 size_t step, admission_ticket& ticket) {
  for (; step < count; ++step) {
    const tier_handle& tier = steps[step];
    if (!tier.counter->try_acquire())
      break;
    auto id = tier.counter->next_permit_id();
    attach_permit(self, tier.counter, tier.owner, id);
    ticket.add(step, tier, id);
  }
  return step;
}

void acquire_from(caf::event_based_actor* self,
                  std::shared_ptr<admission_attempt> attempt, size_t step) {
  // Fast path: free permits and nobody queued; no message needed.
  step = take_free(self, attempt->steps.data(), attempt->step_count, step,
                   attempt->ticket());
  if (step == attempt->step_count) {
    attempt->succeed();
    return;
  }
  // Slow path: queue at the tier's owner until a permit frees or the shared
  // deadline passes. The owner always answers by the deadline.
  const auto& tier = attempt->steps[step];
  attempt->queued_at(tier.kind);
  self->request(tier.owner, caf::infinite, acquire_atom_v, attempt->deadline())
      .then(
          [self, attempt, step](permit_id id) {
            attempt->took(step, id);
            acquire_from(self, attempt, step + 1);
          },
          [self, attempt](caf::error& err) {
            attempt->fail(self, std::move(err));
          });
}

} // namespace

std::shared_ptr<const admission_progress> admit(caf::event_based_actor* self,
                                                const admission_path& path,
                                                duration wait_timeout,
                                                admission_callback done) {
  auto attempt = std::make_shared<admission_attempt>();
  attempt->plan(path, self->clock().now() + wait_timeout);
  attempt->done = std::move(done);
  acquire_from(self, attempt, 0);
  return attempt;
}

void admit_call(caf::event_based_actor* self, const admission_path& path,
                duration wait_timeout, admission_callback done) {
  admission_ticket ticket;
  ticket.set_deadline(self->clock().now() + wait_timeout);
  std::array<std::reference_wrapper<const tier_handle>, max_admission_steps>
      steps{path.session, path.session, path.session, path.session};
  size_t count = 0;
  steps[count++] = path.session;
  if (path.group)
    steps[count++] = *path.group;
  steps[count++] = path.connection;
  steps[count++] = path.global;
  auto step = take_free(self, steps.data(), count, 0, ticket);
  if (step == count) { // the common case: no tier made the call wait
    done(std::move(ticket));
    return;
  }
  // A tier must be waited for: from here on as `admit`, with the permits
  // taken so far.
  auto attempt = std::make_shared<admission_attempt>();
  attempt->plan(path, ticket.deadline());
  attempt->ticket() = std::move(ticket);
  attempt->done = std::move(done);
  acquire_from(self, attempt, step);
}

} // namespace sluice
