#pragma once

// Reading a file the config names -- the config itself, a `file:` secret,
// a TLS file's fingerprint -- at the start, by --check-config and by a
// reload: only a regular file (or a symlink to one), opened without
// blocking, read with a bound, and only a snapshot nobody was writing.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace sluice::config {

// -- limits -------------------------------------------------------------------

/// How old a file's last change must be before one read of it is trusted
/// alone: an editor or a script that rewrites a file in place truncates it
/// first and writes it in steps, and a file read between two steps may
/// parse (a route missing). A younger file is read again once it is this
/// old and taken only if both reads agree. NOTE: a writer that pauses
/// longer than this between two writes of one file cannot be told apart
/// from two files: write a new file and rename it over the old one.
constexpr auto file_settle_time = std::chrono::milliseconds{50};

/// Pairs of reads before a file that keeps changing is refused (each
/// costs at most `file_settle_time`, so a refusal comes within ~0.3 s).
constexpr int file_read_tries = 5;

/// The message of a file refused for changing while it was read.
constexpr const char* file_changed_text =
    "the file changed while it was read; write a new file and rename it "
    "over the old one";

// -- reading ------------------------------------------------------------------

/// Test hooks: run between the steps of a read (the file may be changed
/// there to play a writer).
struct file_read_hooks {
  /// After the bytes of a read, before the file is looked at again.
  std::function<void()> after_read;
  /// Between the two reads of a pair.
  std::function<void()> between_reads;
};

/// The content of the file at `path`, at most `limit` bytes. Refuses, with
/// a `std::invalid_argument` saying why (callers add the key and line),
/// anything but a regular file (a FIFO, a directory, a device: opened with
/// O_NONBLOCK, never read, so nothing blocks a start or a reload), a larger
/// file, one that cannot be read, and one that changed while it was read
/// (`file_changed_text`): a pair of reads must agree on the file's
/// identity, size, modification and change times and content, each read
/// bracketed by two fstat()s that agree too.
std::string read_file_snapshot(const std::string& path, size_t limit,
                               const file_read_hooks& hooks = {});

} // namespace sluice::config
