// What the ShardMachine tests share: a coordinator answered from plain data
// (FakeMembership) and a byte-exact capture of a shard's state, to show that
// a refused request changed nothing.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "server/membership_source.h"
#include "server/shard_machine.h"
#include "server/shard_store.h"

namespace loco::test {

// Members `workers`; one shard, id 0, owning [offset, offset + length) of a
// model of `total` elements; each step's participants and live set are the
// members. Counts the calls. Thread-safe.
class FakeMembership final : public MembershipSource {
 public:
  FakeMembership(std::vector<uint64_t> workers, uint64_t offset, uint64_t length, uint64_t total)
      : workers_(std::move(workers)), offset_(offset), length_(length), total_(total) {}

  StatusOr<v1::ClusterView> GetClusterView() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++view_calls_;
    v1::ClusterView view;
    view.set_epoch(1);
    for (uint64_t id : workers_) view.add_worker_ids(id);
    view.mutable_shard_map()->set_total_elements(total_);
    view.mutable_shard_map()->set_block_size(128);
    v1::ShardInfo* shard = view.mutable_shard_map()->add_shards();
    shard->set_shard_id(0);
    shard->set_offset(offset_);
    shard->set_length(length_);
    view.set_ready(true);
    return view;
  }
  StatusOr<v1::StepParticipantsResponse> GetStepParticipants(uint64_t step, uint32_t,
                                                             uint32_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++participant_calls_;
    v1::StepParticipantsResponse resp;
    resp.set_step(step);
    resp.set_epoch(1);
    for (uint64_t id : workers_) {
      resp.add_participants(id);
      resp.add_live(id);
    }
    return resp;
  }
  int participant_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return participant_calls_;
  }

 private:
  mutable std::mutex mu_;
  const std::vector<uint64_t> workers_;
  const uint64_t offset_, length_, total_;
  int view_calls_ = 0;
  int participant_calls_ = 0;
};

// The options the ShardMachine tests run with: AdamW with weight decay, the
// fp32 return path (so that a pulled shard is the stored one, bit for bit),
// and a pull wait long enough for a slow sanitizer build.
inline ShardMachineOptions FixtureMachineOptions() {
  ShardMachineOptions o;
  o.hyper.lr = 1e-2f;
  o.hyper.weight_decay = 0.1f;
  o.return_path.codec = PullCodec::kFp32;
  o.max_pull_wait = std::chrono::seconds(20);
  return o;
}

// The elementwise mean of two workers' pushes, in double: what the shard
// averages before its AdamW step.
inline std::vector<double> MeanOfTwo(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> mean(a.size());
  for (size_t i = 0; i < a.size(); ++i) mean[i] = (double(a[i]) + double(b[i])) / 2;
  return mean;
}

// Everything a refused request must leave as it was.
struct CapturedShard {
  std::vector<float> params, m, v, replica;
  uint64_t version = 0;
  bool initialized = false;
  uint32_t pending = 0;
};

inline CapturedShard Capture(const ShardMachine& shard) {
  const ShardStore store = shard.Snapshot();
  return {store.params(),        store.m(),         store.v(),
          shard.ReturnReplica(), store.version(),   store.initialized(),
          shard.pending_pushes()};
}

inline bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

inline ::testing::AssertionResult Unchanged(const CapturedShard& before,
                                            const CapturedShard& after) {
  if (!SameBytes(before.params, after.params)) return ::testing::AssertionFailure() << "params";
  if (!SameBytes(before.m, after.m)) return ::testing::AssertionFailure() << "m";
  if (!SameBytes(before.v, after.v)) return ::testing::AssertionFailure() << "v";
  if (!SameBytes(before.replica, after.replica)) return ::testing::AssertionFailure() << "replica";
  if (before.version != after.version) {
    return ::testing::AssertionFailure() << "version " << before.version << " -> " << after.version;
  }
  if (before.initialized != after.initialized) return ::testing::AssertionFailure() << "init";
  if (before.pending != after.pending) {
    return ::testing::AssertionFailure() << "pending " << before.pending << " -> " << after.pending;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace loco::test
