#pragma once

// Memory for the asynchronous operation an object keeps running one at a
// time (a stream's next read, its next write), reused from one operation
// to the next: Asio allocates each operation's state through the
// completion handler's associated allocator, and without one its own
// per-thread cache (one block) misses whenever a loop has several kinds of
// operations in flight, which is always. Asio's "allocation" example, with
// a block that grows to the largest size asked.
//
// Not thread-safe: the operations of one `handler_memory` run on one loop
// (or strand), one at a time; a second one while the first is pending gets
// ordinary heap memory. The memory must outlive the operations using it
// (it is a member of what their handlers keep alive).

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace sluice {

class handler_memory {
public:
  handler_memory() = default;
  handler_memory(const handler_memory&) = delete;
  handler_memory& operator=(const handler_memory&) = delete;
  ~handler_memory() { ::operator delete(block_); }

  void* allocate(std::size_t size) {
    if (in_use_)
      return ::operator new(size);
    if (size > size_) {
      ::operator delete(block_);
      block_ = nullptr;
      size_ = 0;
      block_ = ::operator new(size);
      size_ = size;
    }
    in_use_ = true;
    return block_;
  }

  void deallocate(void* p) noexcept {
    if (p == block_)
      in_use_ = false;
    else
      ::operator delete(p);
  }

  /// Bytes of the block kept (0: nothing allocated through it yet).
  std::size_t kept_bytes() const noexcept { return size_; }

private:
  void* block_ = nullptr;
  std::size_t size_ = 0;
  bool in_use_ = false;
};

/// The allocator a handler bound to a `handler_memory` hands Asio.
template <class T>
class handler_allocator {
public:
  using value_type = T;

  explicit handler_allocator(handler_memory& mem) noexcept : mem_(&mem) {
    // nop
  }

  template <class U>
  handler_allocator(const handler_allocator<U>& other) noexcept
      : mem_(other.mem_) {
    // nop
  }

  T* allocate(std::size_t n) {
    return static_cast<T*>(mem_->allocate(sizeof(T) * n));
  }

  void deallocate(T* p, std::size_t) noexcept { mem_->deallocate(p); }

  template <class U>
  bool operator==(const handler_allocator<U>& other) const noexcept {
    return mem_ == other.mem_;
  }

  template <class U>
  bool operator!=(const handler_allocator<U>& other) const noexcept {
    return mem_ != other.mem_;
  }

private:
  template <class>
  friend class handler_allocator;
  handler_memory* mem_;
};

/// `handler`, with `mem` as its associated allocator.
template <class Handler>
class memory_bound_handler {
public:
  using allocator_type = handler_allocator<void>;

  memory_bound_handler(handler_memory& mem, Handler handler)
      : mem_(&mem), handler_(std::move(handler)) {
    // nop
  }

  allocator_type get_allocator() const noexcept {
    return allocator_type{*mem_};
  }

  template <class... Args>
  void operator()(Args&&... args) {
    handler_(std::forward<Args>(args)...);
  }

private:
  handler_memory* mem_;
  Handler handler_;
};

template <class Handler>
memory_bound_handler<std::decay_t<Handler>>
bind_memory(handler_memory& mem, Handler&& handler) {
  return {mem, std::forward<Handler>(handler)};
}

} // namespace sluice
