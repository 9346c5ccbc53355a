#pragma once

#include <mutex>

#include "sluice/runtime/policy/ejection.hpp"

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

private:
  mutable std::mutex mx_;
  policy::ejection_ledger ledger_;
};

} // namespace sluice
