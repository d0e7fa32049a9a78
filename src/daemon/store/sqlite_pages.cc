#include "src/daemon/store/sqlite_pages.h"

#include <fstream>
#include <optional>

namespace hetpool::daemon {
namespace {

constexpr uint8_t kTableLeaf = 0x0D;

uint32_t Be(absl::string_view s, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

// SQLite's varint: 1 to 9 bytes, big-endian, 7 bits a byte but all 8 in the ninth.
std::optional<uint64_t> Varint(absl::string_view s, size_t& at) {
  uint64_t v = 0;
  for (int i = 0; i < 9; ++i) {
    if (at >= s.size()) return std::nullopt;
    const uint8_t b = static_cast<uint8_t>(s[at++]);
    if (i == 8) return (v << 8) | b;
    v = (v << 7) | (b & 0x7f);
    if ((b & 0x80) == 0) return v;
  }
  return v;
}

// The record format: a header of serial types, then the values (sqlite.org/fileformat2.html).
std::optional<std::vector<SqliteValue>> DecodeRecord(absl::string_view payload) {
  size_t at = 0;
  const auto header_size = Varint(payload, at);
  if (!header_size || *header_size > payload.size() || *header_size < at) return std::nullopt;
  std::vector<uint64_t> types;
  while (at < *header_size) {
    const auto type = Varint(payload, at);
    if (!type) return std::nullopt;
    types.push_back(*type);
  }
  std::vector<SqliteValue> out;
  size_t body = *header_size;
  for (uint64_t type : types) {
    SqliteValue v;
    size_t length = 0;
    if (type == 0) {
      v.kind = SqliteValue::Kind::kNull;
    } else if (type <= 6 || type == 8 || type == 9) {
      static constexpr size_t kSizes[] = {0, 1, 2, 3, 4, 6, 8};
      length = type <= 6 ? kSizes[type] : 0;
      v.kind = SqliteValue::Kind::kInteger;
      if (type == 8 || type == 9) v.integer = type == 9 ? 1 : 0;
    } else if (type == 7) {
      length = 8;
      v.kind = SqliteValue::Kind::kReal;
    } else if (type >= 12) {
      length = static_cast<size_t>((type - (type % 2 == 0 ? 12 : 13)) / 2);
      v.kind = type % 2 == 0 ? SqliteValue::Kind::kBlob : SqliteValue::Kind::kText;
    } else {
      return std::nullopt;  // 10, 11: reserved
    }
    if (body + length > payload.size()) return std::nullopt;
    if (v.kind == SqliteValue::Kind::kInteger && length > 0) {
      uint64_t raw = 0;
      for (size_t i = 0; i < length; ++i) raw = (raw << 8) | static_cast<uint8_t>(payload[body + i]);
      const unsigned shift = static_cast<unsigned>(64 - 8 * length);
      v.integer = static_cast<int64_t>(raw << shift) >> shift;  // sign-extended
    } else if (v.kind == SqliteValue::Kind::kText || v.kind == SqliteValue::Kind::kBlob) {
      v.bytes.assign(payload.data() + body, length);
    }
    body += length;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

SqlitePageScan ScanSqlitePages(const std::string& path,
                               const std::function<void(const std::vector<SqliteValue>&)>& record) {
  SqlitePageScan scan;
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The header says the page size (1 meaning 65536) and the bytes reserved at each page's end.
  size_t page_size = 4096, reserved = 0;
  if (file.size() >= 100 && file.compare(0, 16, std::string("SQLite format 3\0", 16)) == 0) {
    const uint32_t size = Be(file, 16, 2);
    if (size == 1 || (size >= 512 && size <= 32768 && (size & (size - 1)) == 0)) page_size = size == 1 ? 65536 : size;
    reserved = static_cast<uint8_t>(file[20]);
  }
  const size_t usable = page_size - reserved;
  const absl::string_view bytes = file;
  scan.pages = bytes.size() / page_size;
  const auto page = [&](uint32_t number) -> std::optional<absl::string_view> {
    if (number == 0 || number > scan.pages) return std::nullopt;
    return bytes.substr((number - 1) * page_size, page_size);
  };
  for (uint32_t number = 1; number <= scan.pages; ++number) {
    const absl::string_view p = *page(number);
    const size_t header = number == 1 ? 100 : 0;  // page 1 starts with the file header
    if (static_cast<uint8_t>(p[header]) != kTableLeaf) continue;
    ++scan.leaf_pages;
    const uint32_t cells = Be(p, header + 3, 2);
    for (uint32_t c = 0; c < cells; ++c) {
      const size_t pointer_at = header + 8 + 2 * c;
      if (pointer_at + 2 > usable) break;
      size_t at = Be(p, pointer_at, 2);
      const auto payload_size = Varint(p, at);
      const auto rowid = Varint(p, at);
      if (!payload_size || !rowid || at > usable) {
        ++scan.unreadable;
        continue;
      }
      // How much of the payload is on the page; the rest is in a chain of overflow pages.
      const size_t total = *payload_size;
      const size_t max_local = usable - 35;
      size_t local = total;
      if (total > max_local) {
        const size_t min_local = (usable - 12) * 32 / 255 - 23;
        const size_t k = min_local + (total - min_local) % (usable - 4);
        local = k <= max_local ? k : min_local;
      }
      if (at + local + (local < total ? 4 : 0) > usable) {
        ++scan.unreadable;
        continue;
      }
      std::string payload(p.substr(at, local));
      uint32_t next = local < total ? Be(p, at + local, 4) : 0;
      for (size_t hops = 0; payload.size() < total && hops <= scan.pages; ++hops) {
        const auto overflow = page(next);
        if (!overflow) break;
        const size_t take = std::min(usable - 4, total - payload.size());
        const absl::string_view part = overflow->substr(4, take);
        payload.append(part.data(), part.size());
        next = Be(*overflow, 0, 4);
      }
      const auto values = payload.size() == total ? DecodeRecord(payload) : std::nullopt;
      if (!values) {
        ++scan.unreadable;
        continue;
      }
      ++scan.records;
      record(*values);
    }
  }
  return scan;
}

}  // namespace hetpool::daemon
