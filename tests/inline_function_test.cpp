// InlineFunction (support/inline_function.h): a callable of up to N bytes
// kept in place, a larger one on the heap; moves carry it, and it is
// destroyed once, whichever way it is kept.
#include "support/inline_function.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ptepack {
namespace {

using Fn = InlineFunction<int(int), 40>;

TEST(InlineFunction, KeepsUpToNBytesInPlaceAndCallsThem) {
  auto alive = std::make_shared<int>(5);
  // 40 bytes of captures, as placement's change of a moved tensor: a
  // 32-byte value holding a reference count, and an index.
  struct Capture {
    std::shared_ptr<int> owner;
    std::array<uint8_t, 16> more{};
    uint32_t index = 3;
  };
  static_assert(sizeof(Capture) == 40);
  Capture c{alive};
  auto small = [c](int x) { return x * *c.owner + static_cast<int>(c.index); };
  static_assert(Fn::kInline<decltype(small)>);
  static_assert(!Fn::kInline<std::array<char, 48>>);
  static_assert(sizeof(void*) != 8 || sizeof(Fn) == 48);
  c.owner.reset();
  {
    Fn f = std::move(small);
    EXPECT_EQ(alive.use_count(), 2);  // moved into f, not copied
    EXPECT_EQ(f(2), 13);
    Fn g = std::move(f);
    EXPECT_FALSE(f);  // NOLINT: moved from, and says so
    ASSERT_TRUE(g);
    EXPECT_EQ(g(1), 8);
    std::vector<Fn> many;
    many.push_back(std::move(g));
    many.emplace_back([](int x) { return -x; });
    for (int i = 0; i < 100; ++i) many.emplace_back([i](int x) { return x + i; });  // grows: moves each
    EXPECT_EQ(many[0](3), 18);
    EXPECT_EQ(many[1](3), -3);
    EXPECT_EQ(many[101](3), 102);
  }
  EXPECT_EQ(alive.use_count(), 1);  // destroyed with the vector, once
}

TEST(InlineFunction, LargerCallablesGoToTheHeapAndAreFreedOnce) {
  auto alive = std::make_shared<int>(1);
  std::array<int, 32> big{};
  big[31] = 4;
  auto large = [big, alive](int x) { return x + big[31] + *alive; };
  static_assert(!Fn::kInline<decltype(large)>);
  {
    Fn f(large);
    EXPECT_EQ(alive.use_count(), 3);
    Fn g;
    g = std::move(f);
    EXPECT_EQ(alive.use_count(), 3);  // moved by its pointer, not copied
    EXPECT_EQ(g(1), 6);
    g = Fn([](int x) { return x; });  // the heap one is freed here
    EXPECT_EQ(alive.use_count(), 2);
    EXPECT_EQ(g(9), 9);
  }
  EXPECT_EQ(alive.use_count(), 2);
}

}  // namespace
}  // namespace ptepack
