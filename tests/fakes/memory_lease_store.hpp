#pragma once

// An in-memory `lease_store` for the cluster tier's tests: a cap, the live
// permits, and knobs a test turns -- down, answers held back until the test
// lets them go, permits lapsed. Single-threaded, like the virtual-time tests
// that use it.

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>

#include "sluice/actors/lease_store.hpp"

namespace sluice::testing {

class memory_lease_store : public lease_store {
public:
  memory_lease_store(uint32_t cap, duration ttl) : cap_(cap), ttl_(ttl) {
    // nop
  }

  // -- lease_store -------------------------------------------------------------

  void try_acquire(duration within, std::function<void(grant)> done) override;
  void release(const std::string& permit) override;
  void renew(std::vector<std::string> permits,
             std::function<void(lapsed)> done) override;
  bool down() const override { return down_; }
  duration ttl() const override { return ttl_; }
  void on_freed(std::function<void()> wake) override {
    wake_ = std::move(wake);
  }

  // -- knobs -------------------------------------------------------------------

  /// Down: questions already held are answered unanswered, new ones too.
  void set_down(bool down) { down_ = down; }

  /// Holds answers back until `answer_held` (a slow store).
  void hold_answers(bool hold) { hold_ = hold; }

  /// Answers every question held back, in order; returns how many.
  size_t answer_held();

  /// The next question is answered unanswered: as a fault (the store
  /// failed, before it is marked down) or as late (no time left to ask).
  void fail_next(bool fault, bool late) {
    fail_fault_ = fault;
    fail_late_ = late;
    fail_next_ = true;
  }

  /// Drops `permit` as if it lapsed (the store lost it).
  void lapse(const std::string& permit) { live_.erase(permit); }

  /// Another node gave `permit` back while the cap was reached: drops it
  /// and sends the notice.
  void free_elsewhere(const std::string& permit) {
    live_.erase(permit);
    if (wake_)
      wake_();
  }

  /// Takes a permit for another node (outside the tier); returns its id.
  std::string take_elsewhere() {
    auto id = "other" + std::to_string(next_++);
    live_.insert(id);
    return id;
  }

  /// What a full answer says of the earliest lapse (zero: nothing).
  void set_retry_in(duration d) { retry_in_ = d; }

  // -- what the tier did -------------------------------------------------------

  size_t live() const { return live_.size(); }
  uint64_t acquires = 0;
  uint64_t releases = 0;
  uint64_t renewals = 0;
  /// The `within` of the last question.
  duration last_within{};

private:
  void decide(const std::function<void(grant)>& done);

  uint32_t cap_;
  duration ttl_;
  bool down_ = false;
  bool hold_ = false;
  bool fail_next_ = false;
  bool fail_fault_ = false;
  bool fail_late_ = false;
  uint64_t next_ = 1;
  std::set<std::string> live_;
  std::deque<std::function<void(grant)>> held_;
  std::function<void()> wake_;
  duration retry_in_{};
};

} // namespace sluice::testing
