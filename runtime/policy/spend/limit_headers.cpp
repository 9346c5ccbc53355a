#include "sluice/runtime/policy/spend/limit_headers.hpp"

#include <chrono>

namespace sluice::policy {

std::string reset_duration_text(duration d) {
  using namespace std::chrono;
  if (d <= duration::zero())
    return "0s";
  if (d < seconds{1}) {
    auto ms = duration_cast<milliseconds>(d);
    if (ms < d)
      ++ms;
    return std::to_string(ms.count()) + "ms";
  }
  // Milliseconds, rounded up, then h / m / s.
  auto ms = duration_cast<milliseconds>(d);
  if (ms < d)
    ++ms;
  long long total = ms.count();
  long long h = total / 3'600'000;
  long long m = total / 60'000 % 60;
  long long s = total / 1000 % 60;
  long long frac = total % 1000;
  std::string out;
  if (h > 0)
    out += std::to_string(h) + "h";
  if (h > 0 || m > 0)
    out += std::to_string(m) + "m";
  out += std::to_string(s);
  if (frac > 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0')
      f.pop_back();
    out += "." + f;
  }
  return out + "s";
}

std::vector<std::pair<std::string, std::string>>
limit_headers(const limit_state& state) {
  std::vector<std::pair<std::string, std::string>> out;
  auto put = [&](const char* what, const limit_state::lane& l) {
    out.emplace_back(std::string{"x-ratelimit-limit-"} + what,
                     std::to_string(l.limit));
    out.emplace_back(std::string{"x-ratelimit-remaining-"} + what,
                     std::to_string(l.remaining));
    out.emplace_back(std::string{"x-ratelimit-reset-"} + what,
                     reset_duration_text(l.reset));
  };
  if (state.requests)
    put("requests", *state.requests);
  if (state.tokens)
    put("tokens", *state.tokens);
  return out;
}

} // namespace sluice::policy
