// ptepack::Package: a program ready to be written, what ProgramBuilder::Build()
// makes and WritePackage lays out (ExecuTorch's serializer starts from the
// same form, its PTEFile: the program with its data held apart from the
// layout).
//
// It is an opaque value: the program tree, its constants and delegate
// payloads, mutable data and named data are the library's own, and what a
// user does with a Package is write it (WritePackage, as often as wanted:
// writing does not change it; WritePackage of std::move(pkg) consumes it to
// save memory). Copies are cheap and share the contents; the
// data are byte views (into mapped files or caller buffers) that the Package
// keeps alive.
#pragma once

#include <memory>

#include "ptepack/export.h"

namespace ptepack {

struct PackageParts;  // the library's form of a package (not part of the API)
namespace detail {
struct PackageAccess;  // the library's access to a package's parts
}  // namespace detail

class PTEPACK_API Package {
 public:
  // An empty package: WritePackage refuses it ("package has no program").
  Package() = default;

 private:
  friend struct detail::PackageAccess;
  std::shared_ptr<const PackageParts> parts_;
};

}  // namespace ptepack
