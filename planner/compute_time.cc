#include "planner/compute_time.h"

namespace hetpool::planner {

double ModelFlopsPerToken(const ModelSpec& m, const Workload& w) {
  // Kaplan et al.: 2 x layers x context x attention width per forward token for the score and
  // value products. Recomputation is not counted: MFU is model-FLOPs utilisation (PaLM's
  // definition, Megatron's "MFU" as against "HFU"), so a recomputing run reaches a lower MFU, and
  // the MFU the operator states is the one its runs reach.
  const double n = static_cast<double>(m.ActiveParams());
  const double ctx = static_cast<double>(w.mode == Mode::kTrain ? w.seq : w.context);
  const double attention = 2.0 * m.layers * ctx * m.QDim();
  if (w.mode == Mode::kInfer) return 2 * n + attention;
  return 3 * (2 * n + attention);  // forward = 1, backward = 2
}

ComputeModel ComputeModelFor(const PoolClass& cls, double peak_flops, const ClassPricing* row) {
  ComputeModel c;
  c.peak_flops = peak_flops;
  const double bandwidth = cls.example.capability.bandwidth_gbps * 1e9;
  if (row && row->mfu) {
    c.mfu = *row->mfu;
  } else if (cls.example.vendor == Vendor::kNvidia && bandwidth > 0) {
    c.matmul_share = kNvidiaMatmulShare;
    c.memory_bytes_per_s = bandwidth;
  } else {
    c.mfu = DefaultMfu(cls.example.vendor);
  }
  return c;
}

namespace {

// The elementwise traffic per token through every layer. The fit's runs kept their activations
// in 16 bits; fp32 activations move twice the bytes. Serving runs the forward alone.
double ElementwiseBytesPerToken(const ModelSpec& m, const Workload& w) {
  const bool fp32 = w.precision == Precision::kFp32 || w.precision == Precision::kTf32;
  const double passes = w.mode == Mode::kTrain ? 1.0 : 1.0 / 3;
  return kElementwiseBytesPerWidth * (fp32 ? 2 : 1) * passes * static_cast<double>(m.layers) *
         static_cast<double>(m.hidden);
}

}  // namespace

double ComputeSeconds(const ComputeModel& c, const ModelSpec& m, const Workload& w, double tokens, double layer_share,
                      int cards) {
  if (c.peak_flops <= 0 || cards <= 0) return 0;
  const double flops = ModelFlopsPerToken(m, w) * tokens * layer_share / cards;
  if (c.mfu > 0) return flops / (c.peak_flops * c.mfu);
  const double bytes = ElementwiseBytesPerToken(m, w) * tokens * layer_share / cards;
  // Full recomputation runs every layer's forward twice: a third more of both terms.
  const double recompute = w.mode == Mode::kTrain && w.recompute == Recompute::kFull ? 4.0 / 3 : 1.0;
  return recompute * (flops / (c.peak_flops * c.matmul_share) + bytes / c.memory_bytes_per_s);
}

}  // namespace hetpool::planner
