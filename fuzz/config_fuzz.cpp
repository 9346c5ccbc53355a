// libFuzzer target: bytes -> sluice::parse_config. A config_error is the
// expected answer to nonsense; any other exception, a crash, a hang or a
// huge allocation is a bug (SPEC §7: no config file crashes the process).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/runtime.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  try {
    auto cfg = sluice::parse_config(text, "fuzz");
    // A config that parses must also pass the checks the runtime repeats.
    for (auto& [name, kind] : cfg.runtime.kinds)
      sluice::policy::validate(kind);
    for (auto& s : cfg.sources)
      sluice::policy::validate(s.settings.breaker);
  } catch (const sluice::config_error&) {
    // expected for nonsense
  } catch (...) {
    std::abort(); // any other exception escaping is a bug
  }
  return 0;
}
