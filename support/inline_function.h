// InlineFunction<R(A...), N>: a move-only callable that keeps a callable of
// up to N bytes in place, where std::function keeps 16 (and only trivially
// copyable ones) and puts anything larger in a heap block of its own. For
// the changes a walk keeps by the hundred thousand (serialize/model/
// program_parts.cpp, TensorEdits): a split of 300,000 constants kept a
// 40-byte closure per tensor (a key and an index), 64 bytes of heap each
// beside the 32-byte std::function that pointed at it. Larger callables
// still go to the heap.
//
// C++23's std::move_only_function does this with a size of the library's
// choosing; the project builds as C++17.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace ptepack {

template <typename Sig, size_t N>
class InlineFunction;

template <typename R, typename... A, size_t N>
class InlineFunction<R(A...), N> {
 public:
  // Whether a callable of type F is kept in place.
  template <typename F>
  static constexpr bool kInline = sizeof(F) <= N &&
                                  alignof(F) <= alignof(void*) && std::is_nothrow_move_constructible_v<F>;

  InlineFunction() noexcept = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, InlineFunction> &&
                                                    std::is_invocable_r_v<R, std::decay_t<F>&, A...>>>
  InlineFunction(F&& f) {  // NOLINT: implicit, as std::function's
    using D = std::decay_t<F>;
    if constexpr (kInline<D>) {
      new (buf_) D(std::forward<F>(f));
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
    }
    ops_ = &kOps<D>;
  }
  InlineFunction(InlineFunction&& o) noexcept : ops_(o.ops_) {
    if (ops_) ops_->move(o.buf_, buf_);
    o.ops_ = nullptr;
  }
  InlineFunction& operator=(InlineFunction&& o) noexcept {
    if (this != &o) {
      Reset();
      ops_ = o.ops_;
      if (ops_) ops_->move(o.buf_, buf_);
      o.ops_ = nullptr;
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { Reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  // Calls the callable (which must be there).
  R operator()(A... a) const { return ops_->call(buf_, std::forward<A>(a)...); }

 private:
  struct Ops {
    R (*call)(void* buf, A&&... a);
    void (*move)(void* from, void* to) noexcept;  // leaves `from` destroyed
    void (*destroy)(void* buf) noexcept;
  };
  template <typename D>
  static D& Get(void* buf) {
    if constexpr (kInline<D>) {
      return *std::launder(reinterpret_cast<D*>(buf));
    } else {
      return **reinterpret_cast<D**>(buf);
    }
  }
  template <typename D>
  static constexpr Ops kOps = {
      [](void* buf, A&&... a) -> R { return Get<D>(buf)(std::forward<A>(a)...); },
      [](void* from, void* to) noexcept {
        if constexpr (kInline<D>) {
          new (to) D(std::move(Get<D>(from)));
          Get<D>(from).~D();
        } else {
          *reinterpret_cast<D**>(to) = *reinterpret_cast<D**>(from);
        }
      },
      [](void* buf) noexcept {
        if constexpr (kInline<D>) {
          Get<D>(buf).~D();
        } else {
          delete *reinterpret_cast<D**>(buf);
        }
      },
  };

  void Reset() noexcept {
    if (ops_) ops_->destroy(buf_);
    ops_ = nullptr;
  }

  static_assert(N >= sizeof(void*), "room for at least the heap pointer");
  alignas(void*) mutable unsigned char buf_[N];
  const Ops* ops_ = nullptr;
};

}  // namespace ptepack
