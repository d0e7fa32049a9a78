#include "src/daemon/store/sqlite_wal.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hetpool::daemon {
namespace {

constexpr size_t kWalHeader = 32;
constexpr size_t kFrameHeader = 24;
// The magic's low bit says in which byte order the checksums read the log's 32-bit words.
constexpr uint32_t kWalMagic = 0x377f0682;

uint32_t Be32(absl::string_view s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

uint32_t Le32(absl::string_view s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at + 3])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 2])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 8) | uint32_t{static_cast<uint8_t>(s[at])};
}

struct Checksum {
  uint32_t s0 = 0, s1 = 0;
  bool operator==(const Checksum&) const = default;
};

// SQLite's WAL checksum over `bytes` (a multiple of 8 long), continuing from `sum`.
Checksum Continue(Checksum sum, absl::string_view bytes, bool big_endian) {
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    const uint32_t x0 = big_endian ? Be32(bytes, i) : Le32(bytes, i);
    const uint32_t x1 = big_endian ? Be32(bytes, i + 4) : Le32(bytes, i + 4);
    sum.s0 += x0 + sum.s1;
    sum.s1 += x1 + sum.s0;
  }
  return sum;
}

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

absl::StatusOr<WalSalvage> ApplyIntactWalFrames(const std::string& db, const std::string& wal,
                                                const std::string& image) {
  const std::optional<std::string> log = ReadWhole(wal);
  if (!log) return absl::NotFoundError(absl::StrCat(wal, ": no such file"));
  const absl::string_view bytes = *log;
  if (bytes.size() < kWalHeader || (Be32(bytes, 0) & ~1u) != kWalMagic) {
    return absl::DataLossError(absl::StrCat(wal, " does not start with a SQLite write-ahead log's header"));
  }
  const bool big_endian = (Be32(bytes, 0) & 1u) != 0;
  const uint32_t page_size = Be32(bytes, 8) == 1 ? 65536 : Be32(bytes, 8);
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0) {
    return absl::DataLossError(absl::StrCat(wal, ": its header names no valid page size (", Be32(bytes, 8), ")"));
  }
  const uint32_t salt1 = Be32(bytes, 16), salt2 = Be32(bytes, 20);

  WalSalvage salvage;
  // The chain starts from the header's stored checksum: a damaged header still lets the frames
  // be checked against each other.
  Checksum after_previous{Be32(bytes, 24), Be32(bytes, 28)};
  std::optional<Checksum> computed_previous;  // when the previous frame was damaged: its computed checksum
  std::vector<size_t> open_frames;            // intact frames of the transaction not yet committed
  std::map<uint32_t, size_t> newest;          // page number -> offset of its newest committed frame
  uint32_t committed_pages = 0;               // the database's size in pages after the last commit applied
  const size_t frame_size = kFrameHeader + page_size;
  for (size_t at = kWalHeader; at + frame_size <= bytes.size(); at += frame_size) {
    ++salvage.frames;
    const absl::string_view frame = bytes.substr(at, frame_size);
    if (Be32(frame, 8) != salt1 || Be32(frame, 12) != salt2) continue;  // an older log's frame, or damage
    const Checksum stored{Be32(frame, 16), Be32(frame, 20)};
    const auto over_frame = [&](Checksum from) {
      return Continue(Continue(from, frame.substr(0, 8), big_endian), frame.substr(kFrameHeader), big_endian);
    };
    const Checksum computed = over_frame(after_previous);
    const bool intact = computed == stored || (computed_previous && over_frame(*computed_previous) == stored);
    computed_previous.reset();
    if (!intact) {
      ++salvage.damaged;
      computed_previous = computed;
      after_previous = stored;
      continue;
    }
    after_previous = stored;
    ++salvage.intact;
    if (salvage.damaged > 0) ++salvage.past_first_damage;
    open_frames.push_back(at);
    if (const uint32_t commit_size = Be32(frame, 4); commit_size != 0) {
      for (size_t offset : open_frames) newest[Be32(bytes, offset)] = offset;
      open_frames.clear();
      committed_pages = commit_size;
    }
  }

  std::string out = ReadWhole(db).value_or("");
  if (committed_pages != 0) out.resize(size_t{committed_pages} * page_size, '\0');
  for (const auto& [page, offset] : newest) {
    if (page == 0 || page > committed_pages) continue;  // past the database's end at the last commit
    const absl::string_view copy = bytes.substr(offset + kFrameHeader, page_size);
    out.replace(size_t{page - 1} * page_size, page_size, copy.data(), copy.size());
    ++salvage.pages_written;
  }
  std::ofstream file(image, std::ios::binary | std::ios::trunc);
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("write ", image));
  return salvage;
}

}  // namespace hetpool::daemon
