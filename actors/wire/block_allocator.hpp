#pragma once

// Small blocks kept per thread for reuse: the allocator of the HTTP header
// fields of the node's requests and answers and of the HTTP source's
// exchanges (`http_fields`). Beast allocates each field of a header apart
// (its name and value in one block) and frees it with the message; a call
// through the node parses and builds four headers, about twenty fields,
// which cost as many mallocs and frees per request. Here the blocks of a
// request go back to the thread's cache and serve the next one.
//
// Bounded: sizes in classes of `block_class_bytes` up to
// `block_classes * block_class_bytes` bytes, at most `blocks_kept` blocks
// per class and thread (144 KiB per thread at most); larger blocks, and
// blocks given back to a full class, go to operator new and delete. A block
// may be freed on another thread than the one that allocated it (it joins
// that thread's cache): they all come from operator new.

#include <cstddef>
#include <new>

#include <boost/beast/http/fields.hpp>

namespace sluice {

/// Size classes: 64, 128, ... 512 bytes.
constexpr std::size_t block_class_bytes = 64;
constexpr std::size_t block_classes = 8;

/// Blocks a thread keeps per class.
constexpr std::size_t blocks_kept = 64;

namespace detail {

/// A block of class `cls` (1 .. block_classes) from this thread's cache,
/// or null if it has none.
void* take_block(std::size_t cls) noexcept;

/// Keeps `p`, of class `cls`, in this thread's cache; false if the class
/// is full (or the thread is ending): the caller frees it.
bool keep_block(std::size_t cls, void* p) noexcept;

/// Blocks of class `cls` in this thread's cache (for tests).
std::size_t cached_blocks(std::size_t cls) noexcept;

} // namespace detail

/// A stateless allocator drawing small blocks from the thread's cache.
template <class T>
class block_allocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "operator new's alignment");

public:
  using value_type = T;

  block_allocator() noexcept = default;

  template <class U>
  block_allocator(const block_allocator<U>&) noexcept {
    // nop
  }

  T* allocate(std::size_t n) {
    auto cls = size_class(n);
    if (cls == 0)
      return static_cast<T*>(::operator new(n * sizeof(T)));
    if (void* p = detail::take_block(cls))
      return static_cast<T*>(p);
    return static_cast<T*>(::operator new(cls * block_class_bytes));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    auto cls = size_class(n);
    if (cls != 0 && detail::keep_block(cls, p))
      return;
    ::operator delete(p);
  }

  friend bool operator==(const block_allocator&,
                         const block_allocator&) noexcept {
    return true;
  }

  friend bool operator!=(const block_allocator&,
                         const block_allocator&) noexcept {
    return false;
  }

private:
  /// The class of `n` elements, or 0: none (empty, or too large).
  static std::size_t size_class(std::size_t n) noexcept {
    if (n == 0 || n > block_classes * block_class_bytes / sizeof(T))
      return 0;
    return (n * sizeof(T) + block_class_bytes - 1) / block_class_bytes;
  }
};

/// The header fields of every HTTP message the node and its HTTP sources
/// parse or build.
using http_fields = boost::beast::http::basic_fields<block_allocator<char>>;

} // namespace sluice
