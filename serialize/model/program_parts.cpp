#include "serialize/model/program_parts.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

#include "flat_tensor_views_generated.h"
#include "ptepack/error.h"
#include "serialize/format/pte_format.h"

namespace ptepack {

namespace prog {

const fb::Schema& S() { return fb::ProgramSchema(); }

fb::Value& F(fb::Table& t, const char* name) { return fb::Field(S(), t, name); }
const fb::Value& F(const fb::Table& t, const char* name) { return fb::Field(S(), t, name); }

std::shared_ptr<fb::Table> New(const char* table) {
  return fb::NewTable(S(), std::string("executorch_flatbuffer.") + table);
}

void ForEachTensor(fb::Table& program,
                   const std::function<void(fb::Table& plan, uint32_t value_index, fb::Table& tensor)>& fn) {
  const reflection::Object* tensor_def = &Tensor<>::Def();
  for (auto& plan : Program{program}.execution_plan().elems()) {
    if (!plan.table()) continue;
    auto& values = ExecutionPlan{*plan.table()}.values().elems();
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i].table()) continue;
      auto& val = EValue{*values[i].table()}.val();
      if (val.table() && val.table()->def == tensor_def) fn(*plan.table(), static_cast<uint32_t>(i), *val.table());
    }
  }
}

namespace {

// ForEachTensorCow's changes to EValues still in the flatbuffer, by where
// each EValue table is, made to its val (the Tensor) when it is decoded.
// Kept in a deque (no copies as it grows) in the walk's order, which is the
// flatbuffer's order, or its reverse, for the files producers write:
// searched by halves then, and sorted once at the end otherwise.
class TensorEdits final : public fb::TableEdits {
 public:
  void Add(const uint8_t* at, TensorChange change) {
    if (!changes_.empty()) {
      rising_ = rising_ && changes_.back().at <= at;
      falling_ = falling_ && changes_.back().at >= at;
    }
    changes_.push_back(Change{at, std::move(change)});
  }
  // The walk is over: the changes are searched by halves from here on.
  void Seal() {
    if (rising_ || falling_) return;
    std::stable_sort(changes_.begin(), changes_.end(), [](const Change& a, const Change& b) { return a.at < b.at; });
    rising_ = true;
  }
  void Apply(const uint8_t* at, fb::Table& evalue) const override {
    auto change = [&evalue](const Change& c) { c.change(fb::Own(EValue{evalue}.val().mutable_table())); };
    auto by = [](auto less) { return [less](const Change& a, const Change& b) { return less(a.at, b.at); }; };
    std::pair<It, It> range;
    if (rising_) {
      range = std::equal_range(changes_.begin(), changes_.end(), Change{at, {}}, by(std::less<>()));
    } else if (falling_) {
      range = std::equal_range(changes_.begin(), changes_.end(), Change{at, {}}, by(std::greater<>()));
    } else {  // while the walk runs (a value read again before Seal): each one
      for (const Change& c : changes_) {
        if (c.at == at) change(c);
      }
      return;
    }
    for (auto it = range.first; it != range.second; ++it) change(*it);
  }

 private:
  struct Change {
    const uint8_t* at;
    TensorChange change;
  };
  using It = std::deque<Change>::const_iterator;
  std::deque<Change> changes_;
  bool rising_ = true, falling_ = true;
};

}  // namespace

void ForEachTensorCow(fb::Table& program,
                      const std::function<void(const fb::Table& plan, uint32_t value_index, const fb::Table& tensor,
                                               const EditTensorFn& edit)>& fn) {
  const reflection::Object* tensor_def = &Tensor<>::Def();
  auto& plans = Program{program}.execution_plan().mutable_elems();
  // One `edit` for every tensor, reading the position from `at`: a lambda
  // holding the position itself was a heap allocation per tensor. It notes
  // that it ran, since it may have replaced the plan: the walk reads the plan
  // and its values again only then (per value they were a third of the walk).
  struct At {
    size_t plan = 0, value = 0;
    bool owned = false;
  } at;
  // The changes to values still in the flatbuffer: one TableEdits for the
  // walk, sealed when it ends (also by an exception).
  std::shared_ptr<TensorEdits> kept;
  struct SealAtEnd {
    std::shared_ptr<TensorEdits>& kept;
    ~SealAtEnd() {
      if (kept) kept->Seal();
    }
  } seal{kept};
  EditTensorFn edit = [&plans, &at, &kept](TensorChange change) {
    at.owned = true;
    fb::Table& pl = fb::Own(plans[at.plan].mutable_table());
    fb::Value& ev = ExecutionPlan{pl}.values().mutable_elems()[at.value];
    if (ev.lazy()) {  // the change is made wherever the value is decoded
      if (!kept) kept = std::make_shared<TensorEdits>();
      kept->Add(fb::EditTableWith(ev, kept), std::move(change));
    } else {
      // (fb::EditTable keeps a copyable std::function: a change of a value
      // decoded already, which walks meet far less often than lazy ones)
      fb::EditTable(EValue{fb::Own(ev.mutable_table())}.val(),
                    [c = std::make_shared<TensorChange>(std::move(change))](fb::Table& t) { (*c)(t); });
    }
  };
  for (size_t pi = 0; pi < plans.size(); ++pi) {
    if (!plans[pi].table()) continue;
    const fb::Table* plan = plans[pi].table().get();
    const std::vector<fb::Value>* values = &ExecutionPlan{*plan}.values().elems();
    for (size_t i = 0; i < values->size(); ++i) {
      // Read through Peek: a lazily decoded program (fb::DecodeOnDemand) is
      // decoded here a value at a time, and keeps none of it (`edit` keeps
      // the change instead).
      const fb::PeekedTable ev = fb::Peek((*values)[i]);
      if (!ev) continue;
      const auto& val = EValue{*ev}.val();
      if (val.kind != fb::Value::Kind::kTable) continue;
      // Any other value still in the flatbuffer (an Int, a List, ...) is
      // skipped undecoded: a quarter of scalemax's 330,000 values, on every walk.
      if (val.lazy() && val.lazy_def() != tensor_def) continue;
      const fb::PeekedTable tensor = fb::Peek(val);
      if (!tensor || tensor->def != tensor_def) continue;
      at = {pi, i, false};
      fn(*plan, static_cast<uint32_t>(i), *tensor, edit);
      if (at.owned) {  // again: edit() may have replaced them
        plan = plans[pi].table().get();
        values = &ExecutionPlan{*plan}.values().elems();
      }
    }
  }
}

std::optional<uint64_t> TensorNbytes(const fb::Table& t) {
  Tensor tensor{t};
  const Bytes& sizes = tensor.sizes().scalars();
  return ptepack::TensorNbytes(static_cast<ptepack::ScalarType>(tensor.get_scalar_type()), sizes.data, sizes.size / 4);
}

bool IsExternal(const fb::Table& tensor) {
  const auto& eti = Tensor{tensor}.extra_tensor_info();
  return eti.table() &&
         ExtraTensorInfo{*eti.table()}.get_location() == executorch_flatbuffer::TensorDataLocation::EXTERNAL;
}

bool IsPlanned(const fb::Table& tensor) { return Tensor{tensor}.allocation_info().table() != nullptr; }

}  // namespace prog

std::optional<uint64_t> LayoutNbytes(const fb::Table& tl) {
  ptd::TensorLayout layout{tl};
  const Bytes& sizes = layout.sizes().scalars();
  return TensorNbytes(static_cast<ScalarType>(layout.get_scalar_type()), sizes.data, sizes.size / 4);
}

void UpgradeLegacy(ExternalFile& file) {
  file.legacy = false;
  for (auto& e : file.entries) {
    if (e.legacy_tensor && e.tensor_layout) {
      const std::optional<uint64_t> n = LayoutNbytes(*e.tensor_layout);
      if (n && *n > 0 && *n <= e.data.size) e.data = e.data.Sub(0, *n);
    }
    e.legacy_tensor = false;
  }
}

}  // namespace ptepack
