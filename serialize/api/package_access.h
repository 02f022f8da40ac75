// A ptepack::Package's insides, for the library alone: the public class
// (include/ptepack/package.h) holds a PackageParts (serialize/model/
// program_parts.h) that only these functions reach. ProgramBuilder::Build()
// makes packages with PackageOf; WritePackage hands PartsOf to the writer.
#pragma once

#include <memory>
#include <utility>

#include "ptepack/package.h"
#include "serialize/model/program_parts.h"

namespace ptepack {

namespace detail {
struct PackageAccess {
  static const PackageParts& Parts(const Package& pkg) {
    static const PackageParts kEmpty{};  // Package(): no program
    return pkg.parts_ ? *pkg.parts_ : kEmpty;
  }
  static Package Make(PackageParts parts) {
    Package pkg;
    pkg.parts_ = std::make_shared<const PackageParts>(std::move(parts));
    return pkg;
  }
};
}  // namespace detail

// The parts a package holds (an empty PackageParts for Package()).
inline const PackageParts& PartsOf(const Package& pkg) { return detail::PackageAccess::Parts(pkg); }
// A package holding `parts` (shared with its copies; the writer does not change them).
inline Package PackageOf(PackageParts parts) { return detail::PackageAccess::Make(std::move(parts)); }

}  // namespace ptepack
