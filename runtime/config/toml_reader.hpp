#pragma once

// Reading a TOML config strictly: every key read is remembered and any
// other is refused; every number has an upper bound; every error is a
// `config_error` naming the dotted key and its line. The sections
// (`sections.hpp`) are written over it. Internal to the config reader (it
// needs toml++, which the library links privately).

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ios>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/policy/call/backoff.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::config {

// -- limits (every number in a config has an upper bound) -------------------

/// Largest config file read: far over any real config, and what a parse
/// of hostile bytes may cost.
constexpr std::streamsize config_file_limit = 16 << 20;

/// Largest duration of any `_s` / `_ms` key: a week (as the policies).
constexpr double span_limit_s =
    std::chrono::duration<double>(policy::duration_limit).count();

/// Largest count (caps, AIMD limits, bursts): what a tier counter holds.
constexpr int64_t count_limit = 0x7fffffff;

/// Largest request body the node accepts: 1 GiB.
constexpr int64_t max_body_bytes_limit = int64_t{1} << 30;

/// Most idle keep-alive connections an HTTP source keeps.
constexpr uint32_t idle_connections_limit = 10000;

/// Largest quota rate, per second.
constexpr double rate_limit_per_s = 1e9;

/// Redis' port when `backend.address` names none.
constexpr uint16_t redis_default_port = 6379;

/// The line `n` starts on.
int line_of(const toml::node& n);

/// `prefix.key`, or `key` at the top.
std::string join(const std::string& prefix, std::string_view key);

// Reads one TOML table strictly: every key read is remembered, and `done()`
// refuses the first key nobody asked for. Errors name the dotted key and the
// line.
class table_reader {
public:
  table_reader(const toml::table& t, std::string prefix)
      : table_(t)
      , prefix_(std::move(prefix)) {
    // nop
  }

  const std::string& prefix() const noexcept { return prefix_; }

  int line() const { return line_of(table_); }

  [[noreturn]] void fail(std::string_view key, const std::string& problem,
                         const toml::node* at = nullptr) const {
    if (at == nullptr)
      at = table_.get(key);
    throw config_error(join(prefix_, key), problem,
                       at != nullptr ? line_of(*at) : line());
  }

  const toml::node* get(std::string_view key) {
    known_.insert(std::string{key});
    return table_.get(key);
  }

  std::optional<int64_t> integer(std::string_view key) {
    return typed<int64_t>(key, &toml::node::is_integer, "must be an integer");
  }

  std::optional<double> number(std::string_view key) {
    return typed<double>(key, &toml::node::is_number, "must be a number");
  }

  std::optional<bool> boolean(std::string_view key) {
    return typed<bool>(key, &toml::node::is_boolean, "must be true or false");
  }

  std::optional<std::string> string(std::string_view key) {
    return typed<std::string>(key, &toml::node::is_string, "must be a string");
  }

  /// A duration given as a number of `unit`s (key ends in _s or _ms).
  std::optional<duration> span(std::string_view key, double unit_seconds) {
    auto x = number(key);
    if (!x)
      return std::nullopt;
    if (!std::isfinite(*x) || std::fabs(*x * unit_seconds) > span_limit_s)
      fail(key, "must be at most a week (604800 s)");
    return std::chrono::duration_cast<duration>(
        std::chrono::duration<double>(*x * unit_seconds));
  }

  std::optional<uint32_t> count(std::string_view key,
                                int64_t max = count_limit) {
    auto x = integer(key);
    if (!x)
      return std::nullopt;
    if (*x < 0 || *x > max)
      fail(key, "must be an integer in [0, " + std::to_string(max) + "]");
    return static_cast<uint32_t>(*x);
  }

  const toml::table* table(std::string_view key) {
    auto n = get(key);
    if (n == nullptr)
      return nullptr;
    if (!n->is_table())
      fail(key, "must be a table", n);
    return n->as_table();
  }

  const toml::array* array(std::string_view key) {
    auto n = get(key);
    if (n == nullptr)
      return nullptr;
    if (!n->is_array())
      fail(key, "must be an array", n);
    return n->as_array();
  }

  /// Refuses any key that was not read.
  void done() const {
    for (auto&& [k, v] : table_)
      if (known_.count(std::string{k.str()}) == 0)
        throw config_error(join(prefix_, k.str()), "unknown key", line_of(v));
  }

  /// Runs `check`; turns its `std::invalid_argument("field: problem")` into
  /// a `config_error` for the config key of `field` (one of `field`,
  /// `field_s`, `field_ms`, or `aliases[field]`) with its line.
  void checked(std::function<void()> check,
               const std::map<std::string, std::string>& aliases = {}) const {
    try {
      check();
    } catch (const config_error&) {
      throw;
    } catch (const std::invalid_argument& e) {
      auto [field, problem] = read_field_problem(e);
      if (field.empty())
        throw config_error(prefix_, problem, line());
      std::vector<std::string> candidates{field, field + "_s", field + "_ms"};
      if (auto i = aliases.find(field); i != aliases.end())
        candidates.insert(candidates.begin(), i->second);
      for (auto& c : candidates)
        if (auto n = table_.get(c))
          throw config_error(join(prefix_, c), problem, line_of(*n));
      throw config_error(join(prefix_, field), problem, line());
    }
  }

private:
  // Reads `key` as a T if present; refuses a value of another type.
  template <class T>
  std::optional<T> typed(std::string_view key,
                         bool (toml::node::*is_type)() const noexcept,
                         const char* expected) {
    auto n = get(key);
    if (n == nullptr)
      return std::nullopt;
    if (!(n->*is_type)())
      fail(key, expected, n);
    return n->value<T>();
  }

  const toml::table& table_;
  std::string prefix_;
  std::set<std::string> known_;
};

// -- schemas ------------------------------------------------------------------

/// One key of a section and the member its value goes to. A section's plain
/// keys are a schema -- a table of fields -- read by `read_fields`; what
/// needs more than a type, a unit and a bound is read by hand beside it.
template <class S>
struct field {
  std::string_view key;
  void (*read)(table_reader& r, std::string_view key, S& out);
};

namespace detail {

template <class M>
struct member_of;

template <class S, class M>
struct member_of<M S::*> {
  using section = S;
  using type = M;
};

// The unit of a span key: its suffix says it.
constexpr double unit_of(std::string_view key) {
  return key.size() > 3 && key.substr(key.size() - 3) == "_ms" ? 1e-3 : 1.0;
}

} // namespace detail

/// A duration key (`_s` or `_ms`, the unit taken from the suffix), at most
/// a week; the member is a `duration` or an optional one.
template <auto Member>
auto span_field(std::string_view key) {
  using S = typename detail::member_of<decltype(Member)>::section;
  return field<S>{key, [](table_reader& r, std::string_view k, S& out) {
                    if (auto x = r.span(k, detail::unit_of(k)))
                      out.*Member = *x;
                  }};
}

/// A non-negative integer key of at most `Max`.
template <auto Member, int64_t Max = count_limit>
auto count_field(std::string_view key) {
  using S = typename detail::member_of<decltype(Member)>::section;
  using M = typename detail::member_of<decltype(Member)>::type;
  return field<S>{key, [](table_reader& r, std::string_view k, S& out) {
                    if (auto x = r.count(k, Max))
                      out.*Member = static_cast<M>(*x);
                  }};
}

/// A key read by one of `table_reader`'s typed getters (`number`,
/// `boolean`, `string`); the library's `validate` bounds the value.
template <auto Member, auto Get>
auto typed_field(std::string_view key) {
  using S = typename detail::member_of<decltype(Member)>::section;
  return field<S>{key, [](table_reader& r, std::string_view k, S& out) {
                    if (auto x = (r.*Get)(k))
                      out.*Member = *x;
                  }};
}

template <auto Member>
auto number_field(std::string_view key) {
  return typed_field<Member, &table_reader::number>(key);
}

template <auto Member>
auto flag_field(std::string_view key) {
  return typed_field<Member, &table_reader::boolean>(key);
}

template <auto Member>
auto text_field(std::string_view key) {
  return typed_field<Member, &table_reader::string>(key);
}

/// Reads every field of `schema` present in `r` into `out`.
template <class S>
void read_fields(table_reader& r, S& out,
                 std::initializer_list<field<S>> schema) {
  for (auto& f : schema)
    f.read(r, f.key, out);
}

} // namespace sluice::config
