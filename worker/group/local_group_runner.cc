#include "worker/group/local_group_runner.h"

#include <string>
#include <thread>

namespace loco {
namespace {

// Runs fn(r) for every rank, each on its own thread (rank 0 on the caller's),
// and returns the first failure in rank order. Every collective inside fn is
// bounded by the group's timeout, so the joins are bounded too.
Status OnEveryRank(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n > 0 ? n - 1 : 0));
  for (int r = 1; r < n; ++r) {
    threads.emplace_back([&st, &fn, r] { st[static_cast<size_t>(r)] = fn(r); });
  }
  if (n > 0) st[0] = fn(0);
  for (auto& t : threads) t.join();
  for (const Status& s : st) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

LocalGroupRunner::LocalGroupRunner(LocalGroup* group, Worker* worker)
    : group_(group),
      worker_(worker),
      node_grads_(group->num_elements()),
      replicas_(static_cast<size_t>(group->size())),
      grads_(static_cast<size_t>(group->size())) {}

Status LocalGroupRunner::Broadcast() {
  if (node_params_.size() != group_->num_elements()) {
    return FailedPrecondition("LocalGroupRunner::Broadcast: the node's parameters have " +
                              std::to_string(node_params_.size()) + " elements; the group " +
                              std::to_string(group_->num_elements()) +
                              " (call InitParameters first)");
  }
  return OnEveryRank(group_->size(), [this](int r) {
    const LocalSlice s = group_->slice(r);
    std::vector<float>& mine = replicas_[static_cast<size_t>(r)];
    mine.resize(group_->num_elements());
    return group_->AllGather(r, std::span<const float>(node_params_).subspan(s.offset, s.length),
                             mine);
  });
}

StatusOr<StepResult> LocalGroupRunner::Step(const GradientFn& gradient) {
  for (const auto& r : replicas_) {
    if (r.size() != group_->num_elements()) {
      return FailedPrecondition("LocalGroupRunner::Step: call Broadcast after InitParameters");
    }
  }
  Status reduced = OnEveryRank(group_->size(), [&](int r) {
    const size_t i = static_cast<size_t>(r);
    Status g = gradient(r, replicas_[i], &grads_[i]);
    if (!g.ok()) {
      group_->Abort(g.Annotate("local rank " + std::to_string(r) + "'s gradient"));
      return g;
    }
    const LocalSlice s = group_->slice(r);
    return group_->ReduceScatterMean(r, grads_[i],
                                     std::span<float>(node_grads_).subspan(s.offset, s.length));
  });
  if (!reduced.ok()) return reduced;
  StatusOr<StepResult> stepped = worker_->Step(node_grads_, &node_params_);
  if (!stepped.ok()) return stepped;
  LOCO_RETURN_IF_ERROR(Broadcast());
  return stepped;
}

}  // namespace loco
