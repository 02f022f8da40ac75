// SmallVec (support/small_vec.h): one element inline, more on the
// heap; copies and moves keep the elements, in order.
#include "support/small_vec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "serialize/read/plan_lifetimes.h"

namespace ptepack {
namespace {

std::vector<uint32_t> Items(const SmallVec<uint32_t>& v) { return {v.begin(), v.end()}; }

TEST(SmallVec, OneElementInlineMoreOnTheHeap) {
  static_assert(sizeof(void*) != 8 || sizeof(SmallVec<uint32_t>) == 16);
  static_assert(sizeof(void*) != 8 || sizeof(SmallVec<LiveRun>) == 16);
  SmallVec<uint32_t> v;
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.capacity(), 1u);
  v.push_back(7);
  EXPECT_EQ(v.capacity(), 1u);  // inline
  EXPECT_EQ(v.front(), 7u);
  for (uint32_t i = 8; i < 20; ++i) v.push_back(i);
  EXPECT_EQ(v.size(), 13u);
  EXPECT_GE(v.capacity(), 13u);
  for (uint32_t i = 0; i < 13; ++i) EXPECT_EQ(v[i], 7 + i);
  EXPECT_EQ(v.back(), 19u);
  const size_t cap = v.capacity();
  v.clear();
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.capacity(), cap);  // kept, as std::vector's
  v.push_back(v.capacity());
  EXPECT_EQ(Items(v), (std::vector<uint32_t>{static_cast<uint32_t>(cap)}));
}

TEST(SmallVec, PushBackOfItsOwnElementWhileGrowing) {
  SmallVec<uint32_t> v{5};
  v.push_back(v[0]);  // moves to the heap while reading the inline element
  v.push_back(v[1]);
  EXPECT_EQ(Items(v), (std::vector<uint32_t>{5, 5, 5}));
}

TEST(SmallVec, CopiesAndMoves) {
  for (size_t n : {0, 1, 2, 5}) {
    SmallVec<uint32_t> a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<uint32_t>(10 * i + 1));
    const std::vector<uint32_t> want = Items(a);
    SmallVec<uint32_t> b(a);
    EXPECT_EQ(Items(b), want);
    EXPECT_EQ(b, a);
    SmallVec<uint32_t> c(std::move(b));
    EXPECT_EQ(Items(c), want);
    EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(b.capacity(), 1u);
    SmallVec<uint32_t> d{1, 2, 3};
    d = c;
    EXPECT_EQ(Items(d), want);
    SmallVec<uint32_t> e{4};
    e = std::move(d);
    EXPECT_EQ(Items(e), want);
  }
}

TEST(SmallVec, AssignAppendResize) {
  SmallVec<LiveRun> r;
  r.assign(1, LiveRun{0, 9});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].last, 9u);
  const std::vector<LiveRun> more{{3, 4}, {6, 7}};
  r.append(more.begin(), more.end());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2].first, 6u);
  r.resize(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, 0u);
  r.resize(2);
  EXPECT_EQ(r[1].first, 0u);
  EXPECT_EQ(r[1].last, 0u);
  SmallVec<uint32_t> v;
  v.assign(3, 8);
  EXPECT_EQ(Items(v), (std::vector<uint32_t>{8, 8, 8}));
  const std::vector<uint32_t> src{1, 2};
  v.assign(src.begin(), src.end());
  EXPECT_EQ(Items(v), src);
  EXPECT_NE(v, (SmallVec<uint32_t>{1}));
}

}  // namespace
}  // namespace ptepack
