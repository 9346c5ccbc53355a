#include "sluice/runtime/admission_config.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "sluice/runtime/config_error.hpp"

using namespace std::chrono_literals;
using sluice::admission_config;

namespace {

// Returns the config key of the field `validate` refuses (its error says
// "FIELD: problem", as every validator of the library), or "" if none.
std::string refused_key(const admission_config& cfg) {
  try {
    validate(cfg);
  } catch (const std::invalid_argument& e) {
    return "admission." + sluice::read_field_problem(e).field;
  }
  return "";
}

} // namespace

TEST_CASE("admission defaults are the seed's and valid") {
  admission_config cfg;
  CHECK(cfg.session_cap == 16);
  CHECK(cfg.connection_cap == 256);
  CHECK(cfg.global_cap == 1024);
  CHECK(cfg.wait_timeout == 3s);
  CHECK_NOTHROW(validate(cfg));
}

TEST_CASE("zero or negative caps are refused, naming the key") {
  for (int64_t bad :
       {int64_t{0}, int64_t{-1}, int64_t{-1024}, int64_t{1} << 31}) {
    admission_config a;
    a.session_cap = bad;
    CHECK(refused_key(a) == "admission.session_cap");
    admission_config b;
    b.connection_cap = bad;
    CHECK(refused_key(b) == "admission.connection_cap");
    admission_config c;
    c.global_cap = bad;
    CHECK(refused_key(c) == "admission.global_cap");
  }
}

TEST_CASE("a zero or negative wait_timeout is refused, naming the key") {
  admission_config cfg;
  cfg.wait_timeout = 0s;
  CHECK(refused_key(cfg) == "admission.wait_timeout");
  cfg.wait_timeout = -5ms;
  CHECK(refused_key(cfg) == "admission.wait_timeout");
  try {
    validate(cfg);
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string{e.what()}.find("must be positive") != std::string::npos);
  }
}

TEST_CASE("read_field_problem takes a field_error's parts as they are - and "
          "reads the older 'field: problem' text") {
  // Taken as they are: a field holding ": " itself (a header's name may) is
  // not split there, as reading the text would.
  sluice::field_error typed{"headers.X: Y", "unset"};
  auto t = sluice::read_field_problem(typed);
  CHECK(t.field == "headers.X: Y");
  CHECK(t.problem == "unset");
  CHECK(std::string{typed.what()} == "headers.X: Y: unset");
  auto old = sluice::read_field_problem(std::invalid_argument{"rate: bad"});
  CHECK(old.field == "rate");
  CHECK(old.problem == "bad");
  auto none = sluice::read_field_problem(std::invalid_argument{"just bad"});
  CHECK(none.field.empty());
  CHECK(none.problem == "just bad");
}

TEST_CASE("admission settings are refused with a field_error") {
  admission_config cfg;
  cfg.global_cap = 0;
  CHECK_THROWS_AS(validate(cfg), sluice::field_error);
}
