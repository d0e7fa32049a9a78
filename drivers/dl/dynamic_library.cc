#include "drivers/dl/dynamic_library.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hetpool::drivers {

absl::StatusOr<std::unique_ptr<DynamicLibrary>> DynamicLibrary::Open(const std::vector<std::string>& candidates) {
  std::string last_error = "no candidates";
  for (const auto& candidate : candidates) {
    // RTLD_LOCAL keeps vendor symbols out of the global namespace; RTLD_NOW surfaces unresolved
    // dependencies here instead of at the first call.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(handle, candidate));
    const char* error = dlerror();
    last_error = error ? error : "unknown dlopen error";
  }
  return absl::NotFoundError(absl::StrCat("cannot load any of [", absl::StrJoin(candidates, ", "), "]: ", last_error));
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::Find(const char* symbol) const {
  dlerror();
  return dlsym(handle_, symbol);
}

absl::Status DynamicLibrary::MissingSymbol(const char* symbol) const {
  return absl::FailedPreconditionError(
      absl::StrCat(path_, " lacks required symbol ", symbol, " (incompatible or incomplete library)"));
}

std::vector<std::string> LibraryCandidates(const std::string& soname, const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("HETPOOL_VENDOR_LIB_PATH"); env != nullptr && *env != '\0') {
    for (auto dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      candidates.push_back(absl::StrCat(dir, "/", soname));
    }
  }
  candidates.push_back(soname);  // the dynamic linker's own search (ld.so.cache, LD_LIBRARY_PATH)
  for (const auto& dir : extra_dirs) candidates.push_back(absl::StrCat(dir, "/", soname));
  return candidates;
}

}  // namespace hetpool::drivers
