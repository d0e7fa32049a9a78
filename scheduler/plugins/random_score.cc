// Score Random: a uniform random choice among the nodes that pass the filters (the FGD paper's
// "random" baseline). args: {"seed": N} makes the draws repeatable. Raw scores: run it alone.
#include <random>

#include "absl/strings/str_cat.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class RandomScore final : public ScorePlugin {
 public:
  explicit RandomScore(uint64_t seed) : rng_(seed) {}
  absl::string_view Name() const override { return "Random"; }
  int64_t Score(CycleState&, const NodeCandidate&) override {
    return static_cast<int64_t>(rng_() >> 8);  // room for the weight (<= 100)
  }
  void NormalizeScore(std::vector<int64_t>&) override {}

 private:
  std::mt19937_64 rng_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Plugin>> NewRandom(const nlohmann::json& args) {
  uint64_t seed = 1;
  if (!args.is_null()) {
    if (!args.is_object()) return absl::InvalidArgumentError("plugin Random: args must be an object");
    for (const auto& [key, value] : args.items()) {
      if (key != "seed")
        return absl::InvalidArgumentError(absl::StrCat("plugin Random: unknown arg '", key, "' (seed)"));
      if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
        return absl::InvalidArgumentError("plugin Random: seed must be a non-negative integer");
      }
      seed = value.get<uint64_t>();
    }
  }
  return std::shared_ptr<Plugin>(std::make_shared<RandomScore>(seed));
}

}  // namespace hetpool::scheduler::plugins
