// Collective libraries that span vendors, found on the node like the vendor libraries (dlopen at
// run time, never linked): reported in the inventory so hetpoold can choose a job's collective.
#pragma once

#include <functional>
#include <set>
#include <string>

namespace hetpool::drivers {

// "flagcx" when BAAI's FlagCX (libflagcx.so, searched like every vendor library:
// HETPOOL_VENDOR_LIB_PATH first) loads and answers flagcxGetVersion. `note` hears why a library
// that loads was not counted.
std::set<std::string> DiscoverCollectives(const std::function<void(const std::string&)>& note = {});

}  // namespace hetpool::drivers
