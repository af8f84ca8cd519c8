// HyperGroups: the AdamW hyper-parameters one step applies to one shard,
// as spans of the shard (local indices) that cover it in order, each with
// its own lr, betas, eps and weight decay; clipping by norm
// (max_grad_norm, the server's flag) is shard-wide. Made from a push's
// StepHyper (server/push_hyper.h) or, for a push that carries none, from
// the server's flags (Uniform).
//
// A plain value type. Not part of a checkpoint: every push brings the
// step's hyper-parameters again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/adamw.h"

namespace loco {

struct HyperSpan {
  uint64_t begin = 0;  // shard-local, [begin, end)
  uint64_t end = 0;
  AdamWParams params;  // max_grad_norm: HyperGroups::max_grad_norm()
  // p += mean push instead of AdamW (HYPER_UPDATE_ADD_MEAN): no moments,
  // outside the norm; `params` is then unused but valid.
  bool add_mean = false;
  // Where the values came from, for messages: the index of the push's
  // group, or -1 for the server's flags.
  int group = -1;
};

class HyperGroups {
 public:
  HyperGroups() = default;
  // `spans` as given; every span's params.max_grad_norm is set to
  // `max_grad_norm`. Validate says whether they are usable.
  HyperGroups(std::vector<HyperSpan> spans, float max_grad_norm);
  // One span over [0, length) with `params` (group -1: the server's flags).
  static HyperGroups Uniform(size_t length, const AdamWParams& params);

  const std::vector<HyperSpan>& spans() const { return spans_; }
  float max_grad_norm() const { return max_grad_norm_; }

  // OK when the spans cover [0, length) exactly, in order, each non-empty
  // and each span's params valid (ValidateAdamWParams). InvalidArgument
  // otherwise.
  [[nodiscard]] Status Validate(size_t length) const;

  // The first span that ends after `index` (spans() must be in order);
  // spans().end() when none does.
  std::vector<HyperSpan>::const_iterator SpanAt(uint64_t index) const;

  // Empty when both give every element of the shard the same update, lr,
  // betas, eps and weight decay (whatever their grouping). Otherwise the first stretch
  // where they differ and every value that differs there, `*this` first,
  // e.g. "lr 0.001 vs 0.002 on [0, 1000) (group 0 vs group 1)", with the
  // stretch in global indices (`offset`: the shard's first element).
  std::string Difference(const HyperGroups& other, uint64_t offset) const;

 private:
  std::vector<HyperSpan> spans_;
  float max_grad_norm_ = 0.0f;
};

}  // namespace loco
