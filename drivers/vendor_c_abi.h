// Reading what the vendors' C libraries hand back: fixed-size character arrays that may lack
// their terminating NUL, and "count in, count out" lists.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace hetpool::drivers {

// A char[size] field as a string, stopping at the first NUL or at size.
inline std::string Bounded(const char* text, size_t size) { return std::string(text, strnlen(text, size)); }

// A "count in, count out" list (the processes holding a card, in NVML, CNDev, MXSML and Level Zero
// alike): the caller offers a buffer and its size, the library fills it and says how many there
// are. The list can grow between two calls, so a short buffer is grown and the call made again.

enum class VendorListRead {
  kDone,      // *count entries were written
  kTooSmall,  // the buffer was short; *count, when the library sets it, is how many there are
  kFailed,    // not supported, no permission, an error: what the list holds is unknown
};

// `fill(uint32_t* count, Info* buffer)` makes one call. Returns the entries, or nothing when the
// library failed or kept outgrowing the buffer (a card's holders unknown is not "no holders", and
// the callers treat both alike only because they never free a card on an empty answer).
template <typename Info, typename Fill>
std::vector<Info> ReadVendorList(const Info& blank, Fill fill) {
  std::vector<Info> buffer(8, blank);
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint32_t count = static_cast<uint32_t>(buffer.size());
    const VendorListRead read = fill(&count, buffer.data());
    if (read == VendorListRead::kFailed) return {};
    // Some libraries answer success and a count larger than the buffer they filled.
    if (read == VendorListRead::kTooSmall || count > buffer.size()) {
      buffer.assign(std::max<size_t>(count, buffer.size()) + 8, blank);
      continue;
    }
    buffer.resize(count);
    return buffer;
  }
  return {};
}

}  // namespace hetpool::drivers
