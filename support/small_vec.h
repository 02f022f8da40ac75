// SmallVec<T>: a vector of a small trivially copyable T that keeps its first
// element inline, for the many short lists that have one element nearly
// always: a storage's values and live runs in the memory-plan check
// (serialize/read/plan_lifetimes.h), a segment's pieces in a file's layout
// (layout/file_plan.h: one per segment but the constant segment's). 16
// bytes, against std::vector's 24 plus a 32-byte malloc chunk for its one
// element; no allocation for 0 or 1 elements. A second element moves the
// list to the heap, where it stays (clear() keeps the capacity, as
// std::vector's does).
//
// support/ holds such plain containers, which any layer may use; they know
// nothing of ExecuTorch.
//
// Boost.Container's small_vector<T, 1> does this too, but is 32 bytes and a
// new dependency (also for the WebAssembly build); this is the part used.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>

namespace ptepack {

template <typename T>
class SmallVec {
  // One T shares its place with the heap pointer: 16 bytes in all on a
  // 64-bit target for a T of up to 8 bytes (12 on wasm32 for a 4-byte T).
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec copies its elements as bytes");

 public:
  using value_type = T;
  using size_type = size_t;
  using reference = T&;
  using const_reference = const T&;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() : one_() {}
  SmallVec(std::initializer_list<T> l) : one_() { assign(l.begin(), l.end()); }
  SmallVec(const SmallVec& o) : one_() { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept : one_() { Take(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      Free();
      Take(o);
    }
    return *this;
  }
  ~SmallVec() { Free(); }

  T* data() { return OnHeap() ? heap_ : &one_; }
  const T* data() const { return OnHeap() ? heap_ : &one_; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) Grow(n);
  }
  void push_back(T v) {  // by value: `v` may be an element, and Grow moves them
    if (size_ == cap_) Grow(size_t{cap_} * 2);
    data()[size_++] = v;
  }
  void resize(size_t n) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = T();
    size_ = static_cast<uint32_t>(n);
  }
  void assign(size_t n, T v) {
    clear();
    resize(n);
    std::fill(begin(), end(), v);
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    clear();
    append(first, last);
  }
  // Appends [first, last), which must not be elements of this list.
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void append(It first, It last) {
    const auto n = static_cast<size_t>(std::distance(first, last));
    reserve(size_ + n);
    std::copy(first, last, data() + size_);
    size_ += static_cast<uint32_t>(n);
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const SmallVec& a, const SmallVec& b) { return !(a == b); }

 private:
  bool OnHeap() const { return cap_ > 1; }
  void Grow(size_t n) {
    auto* p = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (!p) throw std::bad_alloc();
    if (size_ > 0) std::memcpy(static_cast<void*>(p), data(), size_ * sizeof(T));
    Free();
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void Free() {
    if (OnHeap()) std::free(heap_);
    one_ = T();
    cap_ = 1;
  }
  // Takes o's elements (o is left empty, inline).
  void Take(SmallVec& o) {
    if (o.OnHeap()) {
      heap_ = o.heap_;
    } else {
      one_ = o.one_;
    }
    size_ = o.size_;
    cap_ = o.cap_;
    o.one_ = T();
    o.size_ = 0;
    o.cap_ = 1;
  }

  union {
    T one_;    // the element while cap_ is 1
    T* heap_;  // the elements while cap_ is more
  };
  uint32_t size_ = 0;
  uint32_t cap_ = 1;
};

}  // namespace ptepack
