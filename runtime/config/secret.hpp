#pragma once

#include <array>
#include <string>
#include <string_view>

namespace sluice {

/// A SHA-256 digest.
using sha256_digest = std::array<unsigned char, 32>;

/// Largest secret read from a file: far over any API key, and what a
/// wrong path (a log, a disk image) may cost.
constexpr size_t secret_file_limit = 4096;

/// Largest secret file: the secret and one line ending ("\r\n"). Read as a
/// config file is (config/file_snapshot.hpp): a regular file only.
constexpr size_t secret_file_bytes_limit = secret_file_limit + 2;

/// Shortest secret accepted: a key anyone can guess is no key.
constexpr size_t secret_min_bytes = 16;

/// Reads the secret a config names by reference, never in plain text:
/// `env:VAR` (the variable's value) or `file:PATH` (the file's content,
/// without one trailing newline; a regular file of at most
/// `secret_file_bytes_limit`, read as a settled snapshot:
/// config/file_snapshot.hpp). The secret must be `secret_min_bytes` to
/// `secret_file_limit` printable ASCII bytes. Throws `std::invalid_argument`
/// saying what is wrong (callers add the key and line); the message never
/// contains the secret.
std::string read_secret(std::string_view ref);

/// Reads a value a config names by reference as `read_secret` does, for
/// what is no client key (a tool server's token, an environment value): 1
/// to `secret_file_limit` bytes, no NUL; its user checks the rest (a
/// header's value: no line break). Never in a message either.
std::string read_secret_value(std::string_view ref);

/// SHA-256 of `bytes` (OpenSSL).
sha256_digest sha256(std::string_view bytes);

/// Whether two digests are equal, in time independent of where they differ
/// (OpenSSL's CRYPTO_memcmp).
bool same_digest(const sha256_digest& a, const sha256_digest& b) noexcept;

} // namespace sluice
