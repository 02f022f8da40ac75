// Reading and checking .ptd (FlatTensor) files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "flat_tensor_generated.h"
#include "flat_tensor_legacy_generated.h"
#include "ptepack/report.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/file_io.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// One named blob of a .ptd: a NamedData entry, or (in the legacy layout) a
// TensorMetadata entry pointing into a shared tensor segment.
struct PtdEntry {
  std::string key;
  uint32_t segment_index = 0;
  uint64_t offset = 0;  // within the segment
  uint64_t size = 0;    // bytes
  bool has_layout = false;
  int scalar_type = 0;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
  bool legacy_tensor = false;  // came from the legacy `tensors` list
  uint64_t extent = 0;         // bytes up to the next entry or the segment end (legacy tensors)
  bool valid = false;          // lies inside the file
  uint64_t table_offset = 0;   // file offset of the entry, for messages
};

class PtdFile {
 public:
  static std::unique_ptr<PtdFile> Open(const std::string& path, const ReadOptions& opts = {});
  static std::unique_ptr<PtdFile> FromBytes(Bytes data, std::string name, const ReadOptions& opts = {});

  const Report& report() const { return report_; }
  bool ok() const { return report_.ok(); }
  const std::string& name() const { return name_; }
  const flat_tensor_flatbuffer::FlatTensor* flat_tensor() const { return ft_; }
  // Files written before June 2025 use the legacy FlatTensor layout.
  bool legacy() const { return legacy_ != nullptr; }
  uint32_t legacy_tensor_alignment() const { return legacy_ ? legacy_->tensor_alignment() : 0; }
  bool legacy_has_named_data() const { return legacy_ && legacy_->named_data() != nullptr; }
  const std::vector<PtdEntry>& entries() const { return entries_; }
  Bytes EntryData(const PtdEntry& e) const;
  const FlatTensorHeader& header() const { return header_; }
  const Bytes& file() const { return file_; }
  const std::vector<SegmentSpan>& segments() const { return segments_; }
  Bytes SegmentData(size_t i) const;
  // Data for a key, or nullopt.
  std::optional<Bytes> Find(const std::string& key) const;

 private:
  PtdFile() = default;
  void Parse(const ReadOptions& opts);
  bool ParseHeader();
  bool VerifyFlatbuffer(uint64_t fb_end, const ReadOptions& opts);
  void CheckRootFields(const ReadOptions& opts);
  template <typename Segments>
  void CheckSegments(const Segments* segs, const ReadOptions& opts);
  void CollectEntries();
  void CheckEntries();
  void SetLegacyExtents();

  std::string name_;
  Bytes file_;
  Report report_;
  FlatTensorHeader header_;
  std::vector<SegmentSpan> segments_;
  const flat_tensor_flatbuffer::FlatTensor* ft_ = nullptr;
  const flat_tensor_legacy_flatbuffer::FlatTensor* legacy_ = nullptr;
  std::vector<PtdEntry> entries_;
};

}  // namespace ptepack
