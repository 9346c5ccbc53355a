// The smallest service using Sluice: a runtime over one simulated source,
// one governed call, its answer printed. Built by scripts/consumer-test.sh
// against an install and as a subproject; the includes carry the prefix.

#include <cstdio>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <sluice/messages/errors.hpp>
#include <sluice/runtime/runtime.hpp>

int main() {
  caf::actor_system_config caf_cfg;
  sluice::add_error_category(caf_cfg);
  caf::actor_system sys{caf_cfg};

  sluice::runtime rt{sys, sluice::runtime_config{}};
  rt.add_simulated_source("sim", sluice::sim_config{});
  rt.add_route({"chat", "chat", {"sim"}, {}, {}});

  const std::string chat =
      R"({"model":"sim-chat","messages":[{"role":"user","content":"hi"}]})";
  auto r = rt.call(sluice::call_request{"chat", chat}).get();
  std::printf("%s from %s: %s\n",
              std::string{sluice::to_string(r.status)}.c_str(),
              r.source.c_str(), r.body.c_str());
  return r.ok() ? 0 : 1;
}
