#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "sluice/runtime/policy/breaker/ejection.hpp"

namespace sluice {

/// The routes' ejection limits (`policy::ejection_ledger`) shared by every
/// breaker of a runtime, on any thread: each use holds the lock for one
/// call of the ledger.
class shared_ejections {
public:
  /// Runs `f(ledger)` under the lock and returns what it returns.
  template <class F>
  auto with(F&& f) {
    std::lock_guard<std::mutex> guard{mx_};
    return f(ledger_);
  }

  template <class F>
  auto with(F&& f) const {
    std::lock_guard<std::mutex> guard{mx_};
    return f(static_cast<const policy::ejection_ledger&>(ledger_));
  }

  /// One breaker's place in the ledger, under its source's name. A reload
  /// that removes or replaces the source retires it: the ledger forgets
  /// the source (its replacement starts closed), and every later use by
  /// the old breaker, still draining its calls, does nothing -- so it can
  /// neither count the new breaker's name ejected nor restore it.
  class seat {
    friend class shared_ejections;

  public:
    seat(std::shared_ptr<shared_ejections> all, std::string source)
        : all_(std::move(all)), source_(std::move(source)) {
      // nop
    }

    const std::string& source() const noexcept { return source_; }

    /// Runs `f(ledger, source)` under the lock, unless retired: then
    /// returns `retired_answer` (nothing for `void`).
    template <class F, class R = std::invoke_result_t<
                           F, policy::ejection_ledger&, const std::string&>>
    R with(F&& f, R retired_answer = R()) {
      std::lock_guard<std::mutex> guard{all_->mx_};
      if (retired_)
        return retired_answer;
      return f(all_->ledger_, source_);
    }

    template <class F, class R = std::invoke_result_t<
                           F, policy::ejection_ledger&, const std::string&>,
              std::enable_if_t<std::is_void_v<R>, int> = 0>
    void with(F&& f) {
      std::lock_guard<std::mutex> guard{all_->mx_};
      if (!retired_)
        f(all_->ledger_, source_);
    }

    /// Out of the ledger for good (its source is out of the config).
    /// `forget_name`: the ledger forgets the source's name too -- not for
    /// a seat that never went live (a reload's replacement that was
    /// refused): the name is still the running source's.
    void retire(bool forget_name = true) {
      std::lock_guard<std::mutex> guard{all_->mx_};
      retire_locked(forget_name);
    }

  private:
    void retire_locked(bool forget_name) {
      if (retired_)
        return;
      retired_ = true;
      if (forget_name)
        all_->ledger_.restored(source_);
    }

  public:

  private:
    std::shared_ptr<shared_ejections> all_;
    std::string source_;
    bool retired_ = false; // guarded by all_->mx_
  };

  /// In one step under the lock (a reload's commit, so no breaker sees
  /// the limits half swapped): retires `seats` (as `seat::retire`), then
  /// runs `f(ledger)`.
  template <class Seats, class F>
  void retire_and(const Seats& seats, F&& f) {
    std::lock_guard<std::mutex> guard{mx_};
    for (auto& s : seats)
      if (s)
        s->retire_locked(true);
    f(ledger_);
  }

private:
  mutable std::mutex mx_;
  policy::ejection_ledger ledger_;
};

} // namespace sluice
