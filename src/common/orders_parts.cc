#include "src/common/orders_parts.h"

namespace hetpool {

namespace pb = ::hetpool::v1;

std::vector<pb::Orders> SplitOrders(const pb::Orders& orders, size_t part_bytes) {
  std::vector<pb::Orders> parts(1);
  parts.back().set_version(orders.version());
  size_t used = 0;
  // Starts a new part when `bytes` more would pass the budget (a part is never left empty).
  auto room_for = [&](size_t bytes) -> pb::Orders& {
    if (used > 0 && used + bytes > part_bytes) {
      parts.back().set_more(true);
      parts.emplace_back().set_version(orders.version());
      used = 0;
    }
    used += bytes;
    return parts.back();
  };
  for (const auto& launch : orders.launches()) *room_for(launch.ByteSizeLong()).add_launches() = launch;
  for (const auto& kill : orders.kills()) *room_for(kill.ByteSizeLong()).add_kills() = kill;
  return parts;
}

std::optional<pb::Orders> OrdersAssembler::Add(pb::Orders part) {
  if (partial_ && partial_->version() != part.version()) partial_.reset();
  if (!partial_) {
    partial_ = std::move(part);
  } else {
    for (auto& launch : *part.mutable_launches()) *partial_->add_launches() = std::move(launch);
    for (auto& kill : *part.mutable_kills()) *partial_->add_kills() = std::move(kill);
    partial_->set_more(part.more());
  }
  if (partial_->more()) return std::nullopt;
  std::optional<pb::Orders> complete = std::move(partial_);
  partial_.reset();
  return complete;
}

}  // namespace hetpool
