// How well a set of devices is connected, and the best-connected set of a node's free devices.
// Prefers, per pair: a vendor fabric (NVLink/NVSwitch, MetaXLink, MLU-Link, Xe Link; more lanes
// better) > the same PCIe switch > the same host bridge > the same NUMA node > across sockets.
#pragma once

#include <cstddef>
#include <vector>

#include "hetpool/device.h"

namespace hetpool::scheduler {

// Average pairwise link score of a device set (0 for a single device): fabric links 100 plus
// their lane count, PCIe switch 40, host bridge 30, same NUMA node 20, across sockets 10.
int LinkScore(const std::vector<const DeviceRecord*>& devices);

// The best `count` devices of `free`: the highest link score; among equals, the set that leaves
// the remaining free devices best connected (so link groups stay whole for later jobs), then the
// lowest indices. Empty if there are fewer than `count`.
std::vector<const DeviceRecord*> ChooseDevices(const std::vector<const DeviceRecord*>& free, int count);

// The same on a table of pair scores, for callers that keep one per node (a node's links change
// only with its inventory, and building the table is most of the work):
// PairScoreTable(devices)[i * n + j] is the score of devices i and j (n = devices.size()).
std::vector<int> PairScoreTable(const std::vector<const DeviceRecord*>& devices);
// `free`: positions into the table's devices, in ascending device index. Returns the chosen
// positions (ascending), empty if there are fewer than `count`.
std::vector<size_t> ChooseFromTable(const std::vector<int>& table, size_t n, const std::vector<size_t>& free,
                                    int count);
// LinkScore of the devices at `positions`.
int LinkScoreFromTable(const std::vector<int>& table, size_t n, const std::vector<size_t>& positions);

}  // namespace hetpool::scheduler
