#include "serialize/write/infer_evidence.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ptepack/error.h"

namespace ptepack {
namespace {

template <typename T>
T Read(const uint8_t* buf, uint64_t pos) {
  T v;
  std::memcpy(&v, buf + pos, sizeof(T));
  return v;
}

std::string ShortName(const reflection::Object& obj) {
  std::string n = obj.name()->str();
  auto dot = n.rfind('.');
  return dot == std::string::npos ? n : n.substr(dot + 1);
}

class Walker {
 public:
  Walker(const fb::Schema& s, const uint8_t* buf, uint64_t size, FbObjects& out)
      : s_(s), buf_(buf), out_(out), seen_((size + 63) / 64, 0), vtables_(seen_) {}

  void Table(const reflection::Object& obj, uint64_t t) {
    if (Seen(seen_, t)) return;
    Start(t);
    uint64_t vt = static_cast<uint64_t>(static_cast<int64_t>(t) - Read<int32_t>(buf_, t));
    if (!Seen(vtables_, vt)) Start(vt);  // tables share vtables
    uint16_t vtsize = Read<uint16_t>(buf_, vt);
    const auto& fields = s_.FieldsById(obj);
    for (size_t id = 0; id < fields.size(); ++id) {
      const reflection::Field* f = fields[id];
      if (f == nullptr || f->offset() + 2u > vtsize) continue;
      uint16_t fo = Read<uint16_t>(buf_, vt + f->offset());
      if (fo == 0) continue;
      uint64_t pos = t + fo;
      auto bt = f->type()->base_type();
      if (bt == reflection::String) {
        Start(Target(pos));
      } else if (bt == reflection::Obj) {
        Table(s_.ObjectAt(f->type()->index()), Target(pos));
      } else if (bt == reflection::Union) {
        const reflection::Field* tf = id > 0 ? fields[id - 1] : nullptr;
        uint8_t tag = 0;
        if (tf && tf->offset() + 2u <= vtsize && Read<uint16_t>(buf_, vt + tf->offset()) != 0) {
          tag = Read<uint8_t>(buf_, t + Read<uint16_t>(buf_, vt + tf->offset()));
        }
        if (const reflection::Object* m = s_.UnionMember(f->type()->index(), tag)) Table(*m, Target(pos));
      } else if (bt == reflection::Vector) {
        Vector(obj, *f, Target(pos));
      }
    }
  }

 private:
  uint64_t Target(uint64_t pos) const { return pos + Read<uint32_t>(buf_, pos); }

  // Whether `t` is in `bits` already; adds it.
  static bool Seen(std::vector<uint64_t>& bits, uint64_t t) {
    uint64_t& word = bits[t / 64];
    const uint64_t bit = uint64_t{1} << (t % 64);
    const bool seen = (word & bit) != 0;
    word |= bit;
    return seen;
  }

  uint16_t NameOf(const reflection::Object& obj, const reflection::Field& f) {
    auto it = name_index_.find(&f);
    if (it == name_index_.end()) {
      if (out_.names.size() > UINT16_MAX) throw Error("limit-exceeded", "more scalar vector fields than a schema has");
      out_.names.push_back(ShortName(obj) + "." + f.name()->str());
      it = name_index_.emplace(&f, static_cast<uint16_t>(out_.names.size() - 1)).first;
    }
    return it->second;
  }
  void Start(uint64_t pos) { out_.starts.push_back(static_cast<uint32_t>(pos)); }

  void Vector(const reflection::Object& obj, const reflection::Field& f, uint64_t v) {
    Start(v);
    uint32_t count = Read<uint32_t>(buf_, v);
    auto et = f.type()->element();
    if (et != reflection::String && et != reflection::Obj) {
      out_.vectors.push_back(
          {static_cast<uint32_t>(v), count, NameOf(obj, f), static_cast<uint8_t>(fb::ScalarSize(et))});
      return;
    }
    for (uint32_t i = 0; i < count; ++i) {
      uint64_t target = Target(v + 4 + 4ull * i);
      if (et == reflection::String) {
        Start(target);
      } else {
        Table(s_.ObjectAt(f.type()->index()), target);
      }
    }
  }

  const fb::Schema& s_;
  const uint8_t* buf_;
  FbObjects& out_;
  // A bit per byte of the buffer: the tables walked, and the vtables noted.
  // A std::set of the tables' offsets was 43 MB for 900,000 tables.
  std::vector<uint64_t> seen_, vtables_;
  std::unordered_map<const reflection::Field*, uint16_t> name_index_;
};

}  // namespace

uint64_t FbObjects::NextStart(uint64_t pos) const {
  if (pos > UINT32_MAX) return end;
  auto it = std::lower_bound(starts.begin(), starts.end(), static_cast<uint32_t>(pos));
  return it == starts.end() ? end : *it;
}

FbObjects WalkFlatbuffer(const fb::Schema& schema, const uint8_t* buf, uint64_t size) {
  FbObjects out;
  out.end = size;
  if (size > UINT32_MAX)
    throw Error("limit-exceeded", "flatbuffer of " + std::to_string(size) + " bytes: 4 GiB or more");
  if (size >= 8) Walker(schema, buf, size, out).Table(schema.Root(), Read<uint32_t>(buf, 0));
  std::sort(out.starts.begin(), out.starts.end());
  out.starts.erase(std::unique(out.starts.begin(), out.starts.end()), out.starts.end());
  return out;
}

}  // namespace ptepack
