#include "sluice/runtime/policy/model_match.hpp"

#include <algorithm>
#include <stdexcept>

namespace sluice::policy {

bool glob_match(std::string_view pattern, std::string_view name) noexcept {
  // Iterative, with one backtrack point: linear in practice, never
  // exponential (a hostile pattern of many '*' stays cheap).
  size_t p = 0, n = 0;
  size_t star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

void model_rules::add(std::string pattern, size_t index) {
  if (pattern.empty())
    throw std::invalid_argument("a model name must not be empty");
  if (pattern.size() > max_model_name_bytes)
    throw std::invalid_argument("a model name is at most " +
                                std::to_string(max_model_name_bytes) +
                                " bytes");
  for (unsigned char c : pattern)
    if (c < 0x20 || c == 0x7f)
      throw std::invalid_argument("a model name must not hold control "
                                  "characters");
  auto literals = static_cast<size_t>(
      std::count_if(pattern.begin(), pattern.end(),
                    [](char c) { return c != '*' && c != '?'; }));
  bool is_glob = literals != pattern.size();
  auto duplicate = [&] {
    throw std::invalid_argument("model '" + pattern + "' is listed twice");
  };
  if (!is_glob) {
    if (!exact_.emplace(pattern, index).second)
      duplicate();
    names_.push_back(std::move(pattern));
    return;
  }
  for (auto& g : globs_)
    if (g.pattern == pattern)
      duplicate();
  glob g{std::move(pattern), literals, index};
  // Stable: after every glob at least as specific.
  auto at = std::find_if(globs_.begin(), globs_.end(), [&](const glob& x) {
    return x.literals < g.literals;
  });
  globs_.insert(at, std::move(g));
}

std::optional<size_t> model_rules::match(std::string_view model) const {
  if (model.size() > max_model_name_bytes)
    return std::nullopt;
  if (auto i = exact_.find(std::string{model}); i != exact_.end())
    return i->second;
  for (auto& g : globs_)
    if (glob_match(g.pattern, model))
      return g.index;
  return std::nullopt;
}

} // namespace sluice::policy
