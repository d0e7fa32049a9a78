#include "drivers/collectives/collective_probe.h"

#include "absl/strings/str_cat.h"
#include "drivers/dl/dynamic_library.h"

namespace hetpool::drivers {
namespace {

// flagcx.h: flagcxResult_t flagcxGetVersion(int* version); flagcxSuccess = 0.
using FlagcxGetVersion = int(int*);

bool FlagcxWorks(const std::function<void(const std::string&)>& note) {
  auto lib = DynamicLibrary::Open(LibraryCandidates("libflagcx.so"));
  if (!lib.ok()) return false;  // not installed: the common case, nothing to say
  FlagcxGetVersion* get_version = nullptr;
  if (absl::Status s = (*lib)->Require("flagcxGetVersion", &get_version); !s.ok()) {
    if (note) note(std::string(s.message()));
    return false;
  }
  int version = 0;
  if (const int rc = get_version(&version); rc != 0) {
    if (note) note(absl::StrCat((*lib)->path(), ": flagcxGetVersion returned ", rc));
    return false;
  }
  return true;
}

}  // namespace

std::set<std::string> DiscoverCollectives(const std::function<void(const std::string&)>& note) {
  std::set<std::string> found;
  if (FlagcxWorks(note)) found.insert("flagcx");
  return found;
}

}  // namespace hetpool::drivers
