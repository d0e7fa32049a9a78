#include "src/daemon/state/job_entry.h"

#include <google/protobuf/io/coded_stream.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/store/parse_rows.h"

namespace hetpool::daemon {
namespace {

using google::protobuf::io::CodedInputStream;

// Wire types (protobuf encoding): what follows a field's tag.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// Field numbers read, from proto/hetpool/v1/job.proto (the JobSummary tests check what is read
// against protobuf's parse of a job with every field set).
namespace job_field {
constexpr uint32_t kId = 1, kSpec = 2, kState = 3, kCreatedAt = 13, kStartedAt = 15, kFinishedAt = 16, kSubmitSeq = 17,
                   kRequestId = 18;
}
namespace spec_field {
constexpr uint32_t kUser = 2, kLabels = 3, kPriority = 13, kGroup = 17;
}

bool SkipField(CodedInputStream& in, uint32_t tag) {
  switch (tag & 7) {
    case kVarint: {
      uint64_t ignored;
      return in.ReadVarint64(&ignored);
    }
    case kFixed64: {
      uint64_t ignored;
      return in.ReadLittleEndian64(&ignored);
    }
    case kLengthDelimited: {
      uint32_t length;
      return in.ReadVarint32(&length) && in.Skip(static_cast<int>(length));
    }
    case kFixed32: {
      uint32_t ignored;
      return in.ReadLittleEndian32(&ignored);
    }
    default: return false;  // groups (never written by proto3) or garbage
  }
}

bool ReadString(CodedInputStream& in, std::string& out) {
  uint32_t length;
  return in.ReadVarint32(&length) && in.ReadString(&out, static_cast<int>(length));
}

// Runs `field(tag, read)` for each field of the length-delimited message that starts here:
// `field` reads a field it knows (setting `read`) and returns false when that read failed; the
// fields it leaves unread are skipped. False when the message is not well formed.
template <typename Field>
bool ReadMessage(CodedInputStream& in, Field&& field) {
  uint32_t length;
  // PushLimit never widens the enclosing limit: a length past the end must be refused here.
  if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(in.BytesUntilLimit())) return false;
  const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
  while (uint32_t tag = in.ReadTag()) {
    bool read = false;
    if (!field(tag, read)) return false;
    if (!read && !SkipField(in, tag)) return false;
  }
  const bool whole = in.ConsumedEntireMessage() && in.BytesUntilLimit() == 0;
  in.PopLimit(limit);
  return whole;
}

bool ReadTime(CodedInputStream& in, absl::Time& out) {
  uint64_t seconds = 0;
  uint32_t nanos = 0;
  const bool ok = ReadMessage(in, [&](uint32_t tag, bool& read) {
    if (tag == (1 << 3 | kVarint)) return (read = true) && in.ReadVarint64(&seconds);
    if (tag == (2 << 3 | kVarint)) return (read = true) && in.ReadVarint32(&nanos);
    return true;
  });
  out = absl::FromUnixSeconds(static_cast<int64_t>(seconds)) + absl::Nanoseconds(static_cast<int32_t>(nanos));
  return ok;
}

bool ReadLabel(CodedInputStream& in, JobSummary& summary) {
  std::string key, value;
  if (!ReadMessage(in, [&](uint32_t tag, bool& read) {
        if (tag == (1 << 3 | kLengthDelimited)) return (read = true) && ReadString(in, key);
        if (tag == (2 << 3 | kLengthDelimited)) return (read = true) && ReadString(in, value);
        return true;
      })) {
    return false;
  }
  // A map keeps the last value written for a key, as a parse would.
  for (auto& [k, v] : summary.labels) {
    if (k == key) {
      v = std::move(value);
      return true;
    }
  }
  summary.labels.emplace_back(std::move(key), std::move(value));
  return true;
}

bool ReadSpec(CodedInputStream& in, JobSummary& summary) {
  return ReadMessage(in, [&](uint32_t tag, bool& read) {
    switch (tag) {
      case spec_field::kUser << 3 | kLengthDelimited: return (read = true) && ReadString(in, summary.user);
      case spec_field::kGroup << 3 | kLengthDelimited: return (read = true) && ReadString(in, summary.group);
      case spec_field::kLabels << 3 | kLengthDelimited: return (read = true) && ReadLabel(in, summary);
      case spec_field::kPriority << 3 | kVarint: {
        uint32_t priority;  // an int32 on the wire: negative ones are sign-extended to 64 bits
        if (!(read = true) || !in.ReadVarint32(&priority)) return false;
        summary.priority = static_cast<int32_t>(priority);
        return true;
      }
      default: return true;
    }
  });
}

}  // namespace

const std::string* JobSummary::Label(const std::string& key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

JobSummary SummaryOf(const pb::Job& job) {
  JobSummary s;
  s.id = job.id();
  s.submit_seq = job.submit_seq();
  s.state = job.state();
  s.request_id = job.request_id();
  s.user = job.spec().user();
  s.group = job.spec().group();
  s.priority = job.spec().priority();
  for (const auto& [k, v] : job.spec().labels()) s.labels.emplace_back(k, v);
  s.created_at = FromProtoTime(job.created_at());
  if (job.has_started_at()) s.started_at = FromProtoTime(job.started_at());
  if (job.has_finished_at()) s.finished_at = FromProtoTime(job.finished_at());
  return s;
}

absl::StatusOr<JobSummary> ReadJobSummary(absl::string_view stored) {
  JobSummary s;
  CodedInputStream in(reinterpret_cast<const uint8_t*>(stored.data()), static_cast<int>(stored.size()));
  auto read_time = [&](std::optional<absl::Time>& out) {
    absl::Time t;
    if (!ReadTime(in, t)) return false;
    out = t;
    return true;
  };
  bool ok = true;
  while (ok) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    switch (tag) {
      case job_field::kId << 3 | kLengthDelimited: ok = ReadString(in, s.id); break;
      case job_field::kSpec << 3 | kLengthDelimited: ok = ReadSpec(in, s); break;
      case job_field::kState << 3 | kVarint: {
        uint32_t state;
        ok = in.ReadVarint32(&state);
        s.state = static_cast<pb::JobState>(state);
        break;
      }
      case job_field::kCreatedAt << 3 | kLengthDelimited: ok = ReadTime(in, s.created_at); break;
      case job_field::kStartedAt << 3 | kLengthDelimited: ok = read_time(s.started_at); break;
      case job_field::kFinishedAt << 3 | kLengthDelimited: ok = read_time(s.finished_at); break;
      case job_field::kSubmitSeq << 3 | kVarint: ok = in.ReadVarint64(&s.submit_seq); break;
      case job_field::kRequestId << 3 | kLengthDelimited: ok = ReadString(in, s.request_id); break;
      default: ok = SkipField(in, tag);
    }
  }
  if (!ok || !in.ConsumedEntireMessage() || in.CurrentPosition() != static_cast<int>(stored.size())) {
    return absl::DataLossError(absl::StrCat("not a well-formed job (", stored.size(), " bytes)"));
  }
  return s;
}

absl::StatusOr<JobEntry> JobEntry::FromStored(StoredRow& row) {
  JobEntry entry;
  auto summary = ReadJobSummary(row.bytes);
  if (summary.ok() && IsTerminal(summary->state)) {
    entry.summary_ = *std::move(summary);
    entry.stored_ = std::move(row.bytes);
    return entry;
  }
  pb::Job job;
  if (!summary.ok() || !job.ParseFromString(row.bytes)) {
    return RowDoesNotParse<pb::Job>("job row", row);
  }
  entry.Set(std::move(job));
  return entry;
}

void JobEntry::Set(pb::Job job) {
  summary_ = SummaryOf(job);
  if (job_ != nullptr) {
    *job_ = std::move(job);  // a commit of a live job: no allocation
  } else {
    job_ = std::make_unique<pb::Job>(std::move(job));
  }
  std::string().swap(stored_);  // clear() would keep the bytes' memory
}

void JobEntry::Replace(pb::Job next) {
  if (IsTerminal(next.state())) {
    summary_ = SummaryOf(next);
    stored_ = next.SerializeAsString();
    job_.reset();
  } else {
    Set(std::move(next));
  }
}

void JobEntry::Parse() const {
  job_ = std::make_unique<pb::Job>();
  if (!job_->ParseFromString(stored_)) {
    spdlog::error("job {}: its stored record ({} bytes) does not parse; answering with its summary", summary_.id,
                  stored_.size());
    job_->Clear();
    job_->set_id(summary_.id);
    job_->set_submit_seq(summary_.submit_seq);
    job_->set_state(summary_.state);
    job_->set_request_id(summary_.request_id);
    job_->mutable_spec()->set_user(summary_.user);
    job_->mutable_spec()->set_group(summary_.group);
    job_->mutable_spec()->set_priority(summary_.priority);
    for (const auto& [k, v] : summary_.labels) (*job_->mutable_spec()->mutable_labels())[k] = v;
    *job_->mutable_created_at() = ToProtoTime(summary_.created_at);
    if (summary_.started_at) *job_->mutable_started_at() = ToProtoTime(*summary_.started_at);
    if (summary_.finished_at) *job_->mutable_finished_at() = ToProtoTime(*summary_.finished_at);
    job_->set_reason("StoredRecordDamaged");
    job_->set_message("the store's record of this job is damaged; only its id, owner, state and times remain");
  }
  std::string().swap(stored_);
}

void JobEntry::CopyTo(pb::Job& out) const {
  if (job_ != nullptr || !out.ParseFromString(stored_)) out = job();
}

absl::StatusOr<std::vector<JobEntry>> DecodeStoredJobs(std::vector<StoredRow> rows) {
  return DecodeRows<JobEntry>(std::move(rows), [](StoredRow& row, JobEntry& entry) {
    auto decoded = JobEntry::FromStored(row);
    if (!decoded.ok()) return decoded.status();
    entry = *std::move(decoded);
    return absl::OkStatus();
  });
}

size_t JobEntry::ByteSize() const { return job_ != nullptr ? job_->ByteSizeLong() : stored_.size(); }

}  // namespace hetpool::daemon
