#pragma once

// Which rule a model name falls under. Patterns are exact names or globs
// ('*' any run of characters, '?' one character): a route's model table
// ("gpt-4o", "gpt-4o*", "*") and a client key's allowed models use the
// same rules. Pure.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice::policy {

/// Longest model name or pattern accepted (a longer one is refused).
constexpr size_t max_model_name_bytes = 256;

/// Whether `name` matches the glob `pattern` ('*' and '?'; no escapes).
bool glob_match(std::string_view pattern, std::string_view name) noexcept;

/// A table of patterns, each standing for an index: an exact name beats
/// every glob; among globs the one with the most literal characters wins,
/// then the one added first.
class model_rules {
public:
  /// Adds `pattern` for `index`. Throws `std::invalid_argument` for an
  /// empty or overlong pattern, a control character, or a duplicate.
  void add(std::string pattern, size_t index);

  /// The index of the rule `model` falls under, if any.
  std::optional<size_t> match(std::string_view model) const;

  /// The exact names, in the order they were added (what `/v1/models`
  /// lists: a glob is no model).
  const std::vector<std::string>& exact_names() const noexcept {
    return names_;
  }

  bool empty() const noexcept { return exact_.empty() && globs_.empty(); }

private:
  struct glob {
    std::string pattern;
    size_t literals;
    size_t index;
  };
  std::unordered_map<std::string, size_t> exact_;
  std::vector<std::string> names_;
  /// Most specific first.
  std::vector<glob> globs_;
};

} // namespace sluice::policy
