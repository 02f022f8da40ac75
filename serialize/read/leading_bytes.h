// Judging a file from its leading bytes: how many the readers need.
//
// PteFile and PtdFile check headers and the flatbuffer and never read segment
// data (constants, delegate payloads, named blobs), so a file can be judged
// from its first bytes and its total size: a .pte up to the end of its program
// (the extended header's program_size), a .ptd up to the end of its flatbuffer
// (the FlatTensor header's flatbuffer_offset + flatbuffer_size). Where the
// headers are wrong, the readers stop at them, and the first 64 bytes (what
// ExecuTorch reads first) are enough. The browser viewer (web/) reads large
// files this way, by slices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ptepack/bytes.h"
#include "ptepack/error.h"

namespace ptepack {

// How many leading bytes of a file of `file_size` bytes PteFile or PtdFile
// (FromLeadingBytes) needs, judging from its first bytes `head` (give at least
// the first 64, or the whole file when it is shorter; with fewer this returns
// that many). Never more than `file_size`. A .bpte, and a .pte without an
// extended header (its program is the whole file), need the whole file.
uint64_t LeadingBytesNeeded(const uint8_t* head, size_t n, uint64_t file_size);

// Throws Error("not-loaded") naming `name` when `head` holds fewer bytes than
// LeadingBytesNeeded asks for, or more than the file has.
void CheckLeadingBytes(const Bytes& head, uint64_t file_size, const std::string& name);

// The error of reading segment `segment` of a file held only in part.
Error NotLoaded(const std::string& name, size_t segment, uint64_t in_memory);

}  // namespace ptepack
