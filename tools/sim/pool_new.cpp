// pool_new.cpp — the simulator's global operator new and delete (not in
// sanitized builds, whose own allocator checks every access): small blocks
// come from per-size free lists, carved from 64 KB chunks that are never
// returned. The engine, its sessions and the simulated network allocate
// and free a few dozen small blocks (strings, vectors, rounds) per round,
// in bursts of the same size; glibc's per-thread cache holds seven blocks
// of a size, and the rest of a burst went through its slower paths. What
// the library does is unchanged: only where its blocks come from.
//
// A 16-byte header before each block holds its size class (0: a large
// block, from malloc), so that a delete without a size finds its list too.
// The lists are per thread (a block freed on another thread joins that
// thread's list). MALLOC_PERTURB_ (which `meson test` sets) is honoured as
// glibc honours it: a new block is filled with the byte's complement, a
// freed one with the byte, so that a read after free reads garbage here as
// it would there.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

constexpr std::size_t header = 16;  // keeps blocks at the 16-byte alignment operator new promises
constexpr std::size_t grain = 16;
constexpr std::size_t max_small = 512;  // larger blocks: malloc
constexpr std::size_t classes = max_small / grain + 1;
constexpr std::size_t chunk_size = 64 * 1024;

struct Free {
  Free* next;
};

struct Pool {
  Free* lists[classes] = {};
  std::byte* next = nullptr;
  std::size_t left = 0;
};

thread_local Pool pool;

// perturb: MALLOC_PERTURB_'s byte (0: off), read at the first call (a
// plain global, no guard: operator new may run before any static
// initializer of this file).
int perturb_byte = -1;
int perturb() {
  if (perturb_byte < 0) {
    const char* v = std::getenv("MALLOC_PERTURB_");
    perturb_byte = v == nullptr ? 0 : std::atoi(v) & 0xff;
  }
  return perturb_byte;
}

void* allocate(std::size_t size) {
  if (size == 0) size = 1;
  std::byte* block;
  std::size_t cls = 0;
  if (size <= max_small) {
    cls = (size + grain - 1) / grain;
    Pool& p = pool;
    if (Free* f = p.lists[cls]) {
      // The next block of the list is fetched now, ahead of the next new of
      // its size: a list runs through blocks freed long ago, out of the
      // cache, and each new would otherwise wait for its block's link.
      p.lists[cls] = f->next;
      if (f->next != nullptr) __builtin_prefetch(f->next, 1);
      block = reinterpret_cast<std::byte*>(f) - header;
    } else {
      const std::size_t bytes = header + cls * grain;
      if (p.left < bytes) {
        auto* chunk = static_cast<std::byte*>(std::malloc(chunk_size));
        if (chunk == nullptr) return nullptr;
        p.next = chunk;  // malloc's alignment (16) is the header's
        p.left = chunk_size;  // the rest of the previous chunk (< 528 bytes) is dropped
      }
      block = p.next;
      p.next += bytes;
      p.left -= bytes;
    }
  } else {
    block = static_cast<std::byte*>(std::malloc(header + size));
    if (block == nullptr) return nullptr;
  }
  std::memcpy(block, &cls, sizeof cls);
  void* user = block + header;
  if (const int b = perturb(); b != 0) std::memset(user, b ^ 0xff, cls != 0 ? cls * grain : size);
  return user;
}

void release(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::byte* block = static_cast<std::byte*>(ptr) - header;
  std::size_t cls;
  std::memcpy(&cls, block, sizeof cls);
  if (cls == 0) return std::free(block);
  if (const int b = perturb(); b != 0) std::memset(ptr, b, cls * grain);
  Pool& p = pool;
  p.lists[cls] = new (ptr) Free{p.lists[cls]};
}

void* allocate_or_throw(std::size_t size) {
  while (true) {
    if (void* p = allocate(size)) return p;
    std::new_handler h = std::get_new_handler();
    if (h == nullptr) throw std::bad_alloc();
    h();
  }
}

}  // namespace

void* operator new(std::size_t size) { return allocate_or_throw(size); }
void* operator new[](std::size_t size) { return allocate_or_throw(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void operator delete(void* ptr) noexcept { release(ptr); }
void operator delete[](void* ptr) noexcept { release(ptr); }
void operator delete(void* ptr, std::size_t) noexcept { release(ptr); }
void operator delete[](void* ptr, std::size_t) noexcept { release(ptr); }
void operator delete(void* ptr, const std::nothrow_t&) noexcept { release(ptr); }
void operator delete[](void* ptr, const std::nothrow_t&) noexcept { release(ptr); }
