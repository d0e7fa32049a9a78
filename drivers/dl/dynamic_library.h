// A vendor library opened with dlopen at run time (hetpool never links vendor libraries). Required
// symbols missing make Open's caller fail with one clear error; optional ones come back null.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hetpool::drivers {

class DynamicLibrary {
 public:
  // Tries each candidate (a soname or a path) in order. NOT_FOUND names every place tried and
  // the last dlerror(); the caller logs it once and reports "no devices of this vendor".
  static absl::StatusOr<std::unique_ptr<DynamicLibrary>> Open(const std::vector<std::string>& candidates);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  const std::string& path() const { return path_; }
  void* Find(const char* symbol) const;

  // Resolves `symbol` into `*fn`. Required: FAILED_PRECONDITION naming the symbol and library.
  template <typename Fn>
  absl::Status Require(const char* symbol, Fn** fn) const {
    *fn = reinterpret_cast<Fn*>(Find(symbol));
    if (*fn == nullptr) return MissingSymbol(symbol);
    return absl::OkStatus();
  }
  template <typename Fn>
  void Optional(const char* symbol, Fn** fn) const {
    *fn = reinterpret_cast<Fn*>(Find(symbol));
  }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  absl::Status MissingSymbol(const char* symbol) const;

  void* handle_;
  std::string path_;
};

// Opens the first loadable candidate and fills an entry-point table with `resolve(lib, table)`
// (the vendor's X-macro list of required and optional symbols).
template <typename Table, typename Resolve>
absl::StatusOr<std::pair<std::unique_ptr<DynamicLibrary>, Table>> OpenVendorLibrary(
    const std::vector<std::string>& candidates, Resolve&& resolve) {
  auto opened = DynamicLibrary::Open(candidates);
  if (!opened.ok()) return opened.status();
  Table table;
  if (absl::Status s = resolve(**opened, table); !s.ok()) return s;
  return std::make_pair(*std::move(opened), table);
}

// Directories added in front of the default search (HETPOOL_VENDOR_LIB_PATH, colon-separated), so
// tests and unusual installs can point the loader at a library without changing LD_LIBRARY_PATH.
std::vector<std::string> LibraryCandidates(const std::string& soname, const std::vector<std::string>& extra_dirs = {});

}  // namespace hetpool::drivers
