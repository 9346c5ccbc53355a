#include "sluice/runtime/config/secret.hpp"

#include <utility>

#include <cstdlib>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "sluice/runtime/config/file_snapshot.hpp"

namespace sluice {

namespace {

void check_secret(const std::string& s, const std::string& origin) {
  if (s.empty())
    throw std::invalid_argument(origin + " is empty");
  if (s.size() < secret_min_bytes)
    throw std::invalid_argument(origin +
                                " is too short: a key needs at least " +
                                std::to_string(secret_min_bytes) + " bytes");
  if (s.size() > secret_file_limit)
    throw std::invalid_argument(origin + " is longer than " +
                                std::to_string(secret_file_limit) + " bytes");
  for (unsigned char c : s)
    if (c < 0x21 || c > 0x7e)
      throw std::invalid_argument(
          origin + " holds a byte that is not printable ASCII (a key is "
                   "sent in an HTTP header)");
}

} // namespace

namespace {

// The text `ref` names, and what names it (for messages).
std::pair<std::string, std::string> read_reference(std::string_view ref) {
  if (ref.rfind("env:", 0) == 0) {
    std::string var{ref.substr(4)};
    if (var.empty())
      throw std::invalid_argument("env: needs a variable name (env:VAR)");
    auto value = std::getenv(var.c_str());
    if (value == nullptr)
      throw std::invalid_argument("environment variable " + var +
                                  " is not set");
    return {std::string{value}, "environment variable " + var};
  }
  if (ref.rfind("file:", 0) == 0) {
    std::string path{ref.substr(5)};
    if (path.empty())
      throw std::invalid_argument("file: needs a path (file:PATH)");
    auto s = config::read_file_snapshot(path, secret_file_bytes_limit);
    if (!s.empty() && s.back() == '\n')
      s.pop_back();
    if (!s.empty() && s.back() == '\r')
      s.pop_back();
    return {std::move(s), "'" + path + "'"};
  }
  throw std::invalid_argument("must be \"env:VAR\" or \"file:PATH\" (a key is "
                              "never written in the config itself)");
}

} // namespace

std::string read_secret(std::string_view ref) {
  auto [s, where] = read_reference(ref);
  check_secret(s, where);
  return std::move(s);
}

std::string read_secret_value(std::string_view ref) {
  auto [s, where] = read_reference(ref);
  if (s.empty() || s.size() > secret_file_limit ||
      s.find('\0') != std::string::npos)
    throw std::invalid_argument(where + " must hold 1 to " +
                                std::to_string(secret_file_limit) +
                                " bytes, no NUL");
  return std::move(s);
}

sha256_digest sha256(std::string_view bytes) {
  sha256_digest out{};
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         out.data());
  return out;
}

bool same_digest(const sha256_digest& a, const sha256_digest& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace sluice
