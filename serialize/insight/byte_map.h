// A picture of a file's byte layout (`ptepack map`): the header, the
// flatbuffer, each segment and the padding between them as bands of a bar,
// proportional to their size (or to its logarithm, so that tiny parts show),
// coloured by kind, each with a hover title (name, offset, size); a legend
// and a list of the bands below the bar.
#pragma once

#include <string>

#include "serialize/insight/size.h"

namespace ptepack {

struct ByteMapOptions {
  bool log_scale = false;  // band widths proportional to log2(1 + bytes)
};

// A standalone SVG document.
std::string ByteMapSvg(const FileSize& f, const ByteMapOptions& o = {});
// An HTML page holding the same SVG inline.
std::string ByteMapHtml(const FileSize& f, const ByteMapOptions& o = {});

// Text for XML: markup characters escaped, characters XML 1.0 forbids
// (control characters from names in the file) shown as '?'.
std::string XmlText(const std::string& s);

}  // namespace ptepack
