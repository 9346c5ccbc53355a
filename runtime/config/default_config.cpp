// The default config: runtime/config/default_config.toml, embedded at build
// time, with the call kinds printed from the library's defaults in place of
// its `# {{kinds}}` line.

#include <chrono>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sluice/runtime/config/default_config.hpp"
#include "sluice/runtime/runtime.hpp"

namespace sluice {

namespace config {

// runtime/config/default_config.toml (generated: default_config_text.cpp).
extern const std::string_view default_config_template;

} // namespace config

namespace {

// The kinds' part of the default config, printed from
// `runtime_config::default_kinds()`: a node run on the default config and
// a library user who names no kinds get the same policies (they differed:
// chat's timeout was 120 s here, 300 s there).
std::string default_kinds_text() {
  auto secs = [](duration d) {
    return fmt::format("{}", std::chrono::duration<double>(d).count());
  };
  std::string out =
      "# Call kinds: the library's defaults (runtime_config::default_kinds),\n"
      "# printed from them. A [kinds.NAME] table overrides the keys it "
      "names.\n";
  for (const auto& [name, p] : runtime_config::default_kinds()) {
    out += fmt::format("[kinds.{}]\n", name);
    out += fmt::format("max_attempts = {}\n", p.max_attempts);
    out += fmt::format("stall_window_s = {}\n", secs(p.stall_window));
    out += fmt::format("timeout_s = {}\n", secs(p.attempt_timeout));
    if (p.ttft_timeout)
      out += fmt::format("ttft_timeout_s = {}\n", secs(*p.ttft_timeout));
    out += fmt::format("backoff_base_s = {}\n", secs(p.backoff.base));
    out += fmt::format("backoff_cap_s = {}\n", secs(p.backoff.cap));
    out += fmt::format("backoff_jitter = {}\n", p.backoff.jitter);
    out += fmt::format("poll_interval_s = {}\n", secs(p.poll_interval));
    out += fmt::format("rate_limit_spends_retry = {}{}\n",
                       p.rate_limit_spends_retry,
                       p.rate_limit_spends_retry
                           ? "   # every failure spends the retry budget"
                           : "  # a 429 does not spend the retry budget");
    out += fmt::format("max_retry_after_s = {}\n\n", secs(p.max_retry_after));
  }
  return out;
}

// The template with its `# {{kinds}}` line (and the comment lines right
// after it) replaced by `kinds`.
std::string with_kinds(std::string_view tmpl, const std::string& kinds) {
  constexpr std::string_view marker = "# {{kinds}}";
  auto at = tmpl.find(marker);
  if (at == std::string_view::npos)
    return std::string{tmpl} + "\n" + kinds; // NOTE: not expected
  auto end = at;
  // The marker's comment runs up to the first line that is not one.
  while (end < tmpl.size() && tmpl[end] == '#') {
    auto newline = tmpl.find('\n', end);
    end = newline == std::string_view::npos ? tmpl.size() : newline + 1;
  }
  if (end < tmpl.size() && tmpl[end] == '\n')
    ++end; // the blank line after it: the kinds end with their own
  return std::string{tmpl.substr(0, at)} + kinds +
         std::string{tmpl.substr(end)};
}

} // namespace

std::string_view default_config_text() {
  // Built once; the text lives as long as the process.
  static const std::string text =
      with_kinds(config::default_config_template, default_kinds_text());
  return text;
}

} // namespace sluice
