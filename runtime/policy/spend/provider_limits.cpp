#include "sluice/runtime/policy/spend/provider_limits.hpp"

#include "sluice/runtime/policy/civil_days.hpp"
#include <cctype>
#include <ctime>
#include <string>

namespace sluice::policy {

namespace {

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

char lower(char c) noexcept {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i]))
      return false;
  return true;
}

bool istarts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() &&
         iequals(s.substr(0, prefix.size()), prefix);
}

// Nanoseconds in each unit of OpenAI's reset durations.
std::optional<long double> unit_ns(std::string_view unit) noexcept {
  if (unit == "h")
    return 3600e9L;
  if (unit == "m")
    return 60e9L;
  if (unit == "s" || unit.empty())
    return 1e9L;
  if (unit == "ms")
    return 1e6L;
  if (unit == "us" || unit == "\xC2\xB5s") // µs, as Go prints it
    return 1e3L;
  if (unit == "ns")
    return 1.0L;
  return std::nullopt;
}

// Reads exactly `n` digits at `pos` of `s`.
bool fixed_digits(std::string_view s, size_t& pos, size_t n,
                  unsigned& out) noexcept {
  if (pos + n > s.size())
    return false;
  unsigned v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!is_digit(s[pos + i]))
      return false;
    v = v * 10 + static_cast<unsigned>(s[pos + i] - '0');
  }
  pos += n;
  out = v;
  return true;
}

bool expect(std::string_view s, size_t& pos, char c) noexcept {
  if (pos >= s.size() || lower(s[pos]) != lower(c))
    return false;
  ++pos;
  return true;
}

duration saturated(long double ns) noexcept {
  const long double cap = static_cast<long double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          provider_reset_saturation)
          .count());
  if (!(ns < cap)) // also NaN
    return provider_reset_saturation;
  if (ns <= 0)
    return duration::zero();
  return std::chrono::duration_cast<duration>(
      std::chrono::nanoseconds{static_cast<long long>(ns)});
}

// The lane a header's name (lower case, its prefix taken off) names, and
// which of its fields: "requests-remaining" (Anthropic) or
// "remaining-requests" (OpenAI).
enum class field { limit, remaining, reset };

} // namespace

limit_lane provider_limits::token_lane() const noexcept {
  const limit_lane* best = nullptr;
  for (const limit_lane* l : {&tokens, &input_tokens, &output_tokens}) {
    if (!l->remaining)
      continue;
    if (best == nullptr || *l->remaining < *best->remaining ||
        (*l->remaining == *best->remaining &&
         l->reset.value_or(duration::zero()) >
             best->reset.value_or(duration::zero())))
      best = l;
  }
  return best != nullptr ? *best : tokens;
}

bool provider_limits::empty() const noexcept {
  return requests.empty() && tokens.empty() && input_tokens.empty() &&
         output_tokens.empty();
}

std::optional<uint64_t> parse_limit_count(std::string_view value) noexcept {
  if (value.empty())
    return std::nullopt;
  uint64_t v = 0;
  for (char c : value) {
    if (!is_digit(c))
      return std::nullopt;
    if (v < provider_count_saturation)
      v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v < provider_count_saturation ? v : provider_count_saturation;
}

std::optional<duration> parse_reset_duration(std::string_view value) noexcept {
  if (value.empty())
    return std::nullopt;
  long double total = 0;
  size_t pos = 0;
  bool bare = true;
  while (pos < value.size()) {
    // A number: digits, an optional fraction.
    long double num = 0;
    size_t digits = 0;
    while (pos < value.size() && is_digit(value[pos])) {
      if (num < 1e30L)
        num = num * 10 + (value[pos] - '0');
      ++pos;
      ++digits;
    }
    if (pos < value.size() && value[pos] == '.') {
      ++pos;
      long double scale = 0.1L;
      while (pos < value.size() && is_digit(value[pos])) {
        num += (value[pos] - '0') * scale;
        scale /= 10;
        ++pos;
        ++digits;
      }
    }
    if (digits == 0)
      return std::nullopt;
    // Its unit: letters up to the next digit.
    size_t start = pos;
    while (pos < value.size() && !is_digit(value[pos]) && value[pos] != '.')
      ++pos;
    auto unit = value.substr(start, pos - start);
    if (unit.empty()) {
      // A bare number is seconds, and only alone ("30", not "1m30").
      if (!bare || pos != value.size())
        return std::nullopt;
    }
    bare = false;
    auto ns = unit_ns(unit);
    if (!ns)
      return std::nullopt;
    total += num * *ns;
  }
  return saturated(total);
}

std::optional<duration>
parse_reset_instant(std::string_view v,
                    std::chrono::system_clock::time_point now) noexcept {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  size_t pos = 0;
  unsigned year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!fixed_digits(v, pos, 4, year) || !expect(v, pos, '-') ||
      !fixed_digits(v, pos, 2, month) || !expect(v, pos, '-') ||
      !fixed_digits(v, pos, 2, day) ||
      !(expect(v, pos, 'T') || expect(v, pos, ' ')) ||
      !fixed_digits(v, pos, 2, hour) || !expect(v, pos, ':') ||
      !fixed_digits(v, pos, 2, minute) || !expect(v, pos, ':') ||
      !fixed_digits(v, pos, 2, second))
    return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
      minute > 59 || second > 60)
    return std::nullopt;
  long double fraction = 0;
  if (pos < v.size() && v[pos] == '.') {
    ++pos;
    long double scale = 0.1L;
    size_t digits = 0;
    while (pos < v.size() && is_digit(v[pos])) {
      fraction += (v[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0)
      return std::nullopt;
  }
  long long offset_s = 0;
  if (expect(v, pos, 'Z')) {
    // UTC
  } else if (pos < v.size() && (v[pos] == '+' || v[pos] == '-')) {
    int sign = v[pos] == '-' ? -1 : 1;
    ++pos;
    unsigned oh = 0, om = 0;
    if (!fixed_digits(v, pos, 2, oh) || !expect(v, pos, ':') ||
        !fixed_digits(v, pos, 2, om) || oh > 23 || om > 59)
      return std::nullopt;
    offset_s = sign * static_cast<long long>(oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  if (pos != v.size())
    return std::nullopt;
  long long days = days_from_civil(year, month, day);
  long double at_s = static_cast<long double>(days) * 86400 + hour * 3600 +
                     minute * 60 + second + fraction - offset_s;
  long double now_s =
      std::chrono::duration<long double>(now.time_since_epoch()).count();
  return saturated((at_s - now_s) * 1e9L);
}

void read_limit_header(provider_limits& limits, std::string_view name,
                       std::string_view value,
                       std::chrono::system_clock::time_point now) noexcept {
  limit_lane* lane = nullptr;
  field which = field::limit;
  constexpr std::string_view openai = "x-ratelimit-";
  constexpr std::string_view anthropic = "anthropic-ratelimit-";
  if (istarts_with(name, openai)) {
    auto rest = name.substr(openai.size());
    // FIELD-LANE
    struct {
      std::string_view text;
      field f;
    } fields[] = {{"limit-", field::limit},
                  {"remaining-", field::remaining},
                  {"reset-", field::reset}};
    for (auto& f : fields) {
      if (!istarts_with(rest, f.text))
        continue;
      auto l = rest.substr(f.text.size());
      which = f.f;
      if (iequals(l, "requests"))
        lane = &limits.requests;
      else if (iequals(l, "tokens"))
        lane = &limits.tokens;
      break;
    }
  } else if (istarts_with(name, anthropic)) {
    auto rest = name.substr(anthropic.size());
    // LANE-FIELD
    struct {
      std::string_view text;
      limit_lane* l;
    } lanes[] = {{"requests-", &limits.requests},
                 {"tokens-", &limits.tokens},
                 {"input-tokens-", &limits.input_tokens},
                 {"output-tokens-", &limits.output_tokens}};
    for (auto& l : lanes) {
      if (!istarts_with(rest, l.text))
        continue;
      auto f = rest.substr(l.text.size());
      if (iequals(f, "limit"))
        which = field::limit;
      else if (iequals(f, "remaining"))
        which = field::remaining;
      else if (iequals(f, "reset"))
        which = field::reset;
      else
        break;
      lane = l.l;
      break;
    }
  }
  if (lane == nullptr)
    return;
  switch (which) {
  case field::limit:
    if (auto n = parse_limit_count(value))
      lane->limit = n;
    break;
  case field::remaining:
    if (auto n = parse_limit_count(value))
      lane->remaining = n;
    break;
  case field::reset: {
    // OpenAI: a duration; Anthropic: an instant.
    auto d = name.size() > 0 && lower(name[0]) == 'x'
                 ? parse_reset_duration(value)
                 : parse_reset_instant(value, now);
    if (d)
      lane->reset = d;
    break;
  }
  }
}

} // namespace sluice::policy
