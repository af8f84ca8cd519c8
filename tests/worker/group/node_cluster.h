// Shared setup of the node-local group cluster tests: an in-process cluster
// (tests/cluster/test_cluster.h) with an fp32 return path, worker options
// with bounded waits, and the per-device gradients the tests feed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "tests/cluster/test_cluster.h"
#include "worker/group/local_group.h"
#include "client/worker.h"

namespace loco::test {

// Not a multiple of the block size nor of the alignment: the last shard and
// the last quantization block are partial.
inline constexpr size_t kNodeElements = 3 * 1024 + 2 * 128 + 37;  // 3365
inline constexpr uint32_t kNodeShards = 3;
inline constexpr uint32_t kNodeAlign = 256;

AdamWParams NodeHyper();
ClusterOptions NodeClusterOptions();
WorkerOptions NodeWorkerOptions(const TestCluster& cluster, PushCodec codec,
                                const std::string& name);

std::vector<float> Uniform(size_t n, uint64_t seed, float lo, float hi);

// Device `device`'s gradient at step `step` and parameters `params`: a pull
// towards a target of its own plus noise of its own, so that devices and
// steps differ and the gradient depends on where the parameters are.
std::vector<float> DeviceGradient(int device, int64_t step, std::span<const float> params);

// The joined worker's shard map as LocalSlices.
std::vector<LocalSlice> ShardSlices(const Worker& worker);

// Connects and joins a worker; null (with a test failure) on error.
std::unique_ptr<Worker> JoinNode(const WorkerOptions& options);

}  // namespace loco::test
