// slab_pool.hpp — lease records in slabs.
//
// A program may hold 100,000 leases, each a record of about 200 bytes made
// by allocate_shared. From malloc each is a chunk with an 8-byte header,
// placed among the acquire rounds' short-lived allocations; once those are
// freed, the holes between records stay resident (the leases benchmark
// measured 56 bytes per lease of them beside 210 in use). A SlabPool hands
// out slots of one size from 128 KiB slabs and keeps freed slots for the
// next record: records lie side by side, and what the rounds free is
// reused by the rounds.
//
// Slabs are never given back (a program that held 100,000 leases once is
// likely to again); the pool itself is never destroyed (a Lease in a
// static object may outlive every other static). Thread-safe: a record is
// made on the loop or a user's thread and freed by whoever drops its last
// reference. Under AddressSanitizer the pool is bypassed, so that a use
// of a freed record is still caught.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <utility>

namespace redlock::detail {

class SlabPool {
 public:
  explicit SlabPool(std::size_t slot) noexcept : slot_(slot < sizeof(Free) ? sizeof(Free) : slot) {}
  SlabPool(const SlabPool&) = delete;
  SlabPool& operator=(const SlabPool&) = delete;
  // Frees every slab (a pool's slots must all be given back first). The
  // records' own pools are never destroyed.
  ~SlabPool() {
    while (slabs_ != nullptr) ::operator delete(std::exchange(slabs_, slabs_->next));
  }

  void* take() {
    std::lock_guard lock(mu_);
    if (free_ != nullptr) return std::exchange(free_, free_->next);
    if (static_cast<std::size_t>(end_ - next_) < slot_) {
      // A slab starts with the link to the one before (for the destructor),
      // its slots after it.
      char* slab = static_cast<char*>(::operator new(slab_bytes));
      slabs_ = ::new (slab) Slab{slabs_};
      next_ = slab + slab_header;
      end_ = next_ + (slab_bytes - slab_header) / slot_ * slot_;
    }
    return std::exchange(next_, next_ + slot_);
  }

  void give(void* p) noexcept {
    std::lock_guard lock(mu_);
    free_ = ::new (p) Free{free_};
  }

  static constexpr std::size_t slab_bytes = 128 * 1024;

 private:
  struct Free {
    Free* next;
  };
  struct Slab {
    Slab* next;
  };
  static constexpr std::size_t slab_header = alignof(std::max_align_t);
  std::mutex mu_;
  const std::size_t slot_;
  Free* free_ = nullptr;  // slots given back
  char* next_ = nullptr;  // the current slab's unused part
  char* end_ = nullptr;
  Slab* slabs_ = nullptr;  // every slab, newest first
};

// SlabAllocator — an allocator for allocate_shared: single objects come
// from a pool of their own size (one per type, made on first use and never
// destroyed), arrays from operator new.
template <class T>
struct SlabAllocator {
  using value_type = T;
  SlabAllocator() noexcept = default;
  template <class U>
  SlabAllocator(const SlabAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
#if !defined(__SANITIZE_ADDRESS__)
    if (n == 1 && alignof(T) <= alignof(std::max_align_t)) return static_cast<T*>(pool().take());
#endif
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if !defined(__SANITIZE_ADDRESS__)
    if (n == 1 && alignof(T) <= alignof(std::max_align_t)) return pool().give(p);
#endif
    std::allocator<T>().deallocate(p, n);
  }

  template <class U>
  bool operator==(const SlabAllocator<U>&) const noexcept {
    return true;
  }

 private:
  static SlabPool& pool() {
    static SlabPool* const p = new SlabPool((sizeof(T) + alignof(T) - 1) / alignof(T) * alignof(T));
    return *p;
  }
};

}  // namespace redlock::detail
