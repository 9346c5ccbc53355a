#include "sluice/runtime/policy/call/governor_phase.hpp"

namespace sluice::policy {

std::string_view to_string(governor_phase x) noexcept {
  switch (x) {
  case governor_phase::idle:
    return "idle";
  case governor_phase::admitting:
    return "admitting";
  case governor_phase::choosing:
    return "choosing";
  case governor_phase::attempting:
    return "attempting";
  case governor_phase::backing_off:
    return "backing_off";
  case governor_phase::waiting:
    return "waiting";
  case governor_phase::finished:
    return "finished";
  }
  return "?";
}

bool may_enter(governor_phase from, governor_phase to) noexcept {
  using p = governor_phase;
  switch (from) {
  case p::idle:
    return to == p::admitting;
  case p::admitting: // admitted, or busy / the cluster backend failed
    return to == p::choosing || to == p::finished;
  case p::choosing: // a source took it, none did, or the stall check ended it
    return to == p::attempting || to == p::waiting || to == p::finished;
  case p::attempting: // an answer ends the call or earns a backoff
    return to == p::backing_off || to == p::finished;
  case p::backing_off: // the stall check after a 429 backoff may end it
    return to == p::choosing || to == p::finished;
  case p::waiting:
    return to == p::choosing;
  case p::finished:
    return false;
  }
  return false;
}

} // namespace sluice::policy
