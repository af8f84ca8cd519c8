#include "server/hyper_groups.h"

#include <algorithm>

#include "rpc/step_hyper.h"

namespace loco {
namespace {

std::string SourceOf(const HyperSpan& span) {
  return span.group < 0 ? "the server's flags" : "group " + std::to_string(span.group);
}

// "lr 0.001 vs 0.002, weight_decay 0 vs 0.1"; empty when the values agree.
std::string DifferingValues(const AdamWParams& a, const AdamWParams& b) {
  std::string out;
  const auto compare = [&out](const char* field, float x, float y) {
    if (x == y) return;
    if (!out.empty()) out += ", ";
    out += std::string(field) + " " + ShortestFloat(x) + " vs " + ShortestFloat(y);
  };
  compare("lr", a.lr, b.lr);
  compare("beta1", a.beta1, b.beta1);
  compare("beta2", a.beta2, b.beta2);
  compare("eps", a.eps, b.eps);
  compare("weight_decay", a.weight_decay, b.weight_decay);
  return out;
}

const char* UpdateName(const HyperSpan& span) { return span.add_mean ? "add_mean" : "adamw"; }

}  // namespace

HyperGroups::HyperGroups(std::vector<HyperSpan> spans, float max_grad_norm)
    : spans_(std::move(spans)), max_grad_norm_(max_grad_norm) {
  for (HyperSpan& span : spans_) span.params.max_grad_norm = max_grad_norm;
}

HyperGroups HyperGroups::Uniform(size_t length, const AdamWParams& params) {
  HyperSpan span;
  span.begin = 0;
  span.end = length;
  span.params = params;
  return HyperGroups({span}, params.max_grad_norm);
}

Status HyperGroups::Validate(size_t length) const {
  if (spans_.empty()) return InvalidArgument("no hyper-parameters for the shard's step");
  uint64_t next = 0;
  for (size_t i = 0; i < spans_.size(); ++i) {
    const HyperSpan& span = spans_[i];
    const std::string name = "hyper-parameter span " + std::to_string(i) + " [" +
                             std::to_string(span.begin) + ", " + std::to_string(span.end) + ")";
    if (span.begin != next) {
      return InvalidArgument(name + " should begin at " + std::to_string(next) +
                             ": the spans must cover [0, " +
                             std::to_string(length) + ") in order, without gaps or overlaps");
    }
    if (span.end <= span.begin || span.end > length) {
      return InvalidArgument(name + " is empty or passes the shard's end " +
                             std::to_string(length));
    }
    LOCO_RETURN_IF_ERROR(ValidateAdamWParams(span.params).Annotate(name));
    next = span.end;
  }
  if (next != length) {
    return InvalidArgument("the hyper-parameter spans end at " + std::to_string(next) +
                           ", not at the shard's end " +
                           std::to_string(length));
  }
  return Status::Ok();
}

std::vector<HyperSpan>::const_iterator HyperGroups::SpanAt(uint64_t index) const {
  return std::upper_bound(spans_.begin(), spans_.end(), index,
                          [](uint64_t i, const HyperSpan& span) { return i < span.end; });
}

std::string HyperGroups::Difference(const HyperGroups& other, uint64_t offset) const {
  // Both lists are in order: walk their intersections.
  auto a = spans_.begin();
  auto b = other.spans_.begin();
  while (a != spans_.end() && b != other.spans_.end()) {
    const uint64_t begin = std::max(a->begin, b->begin);
    const uint64_t end = std::min(a->end, b->end);
    if (begin < end) {
      std::string values = DifferingValues(a->params, b->params);
      if (a->add_mean != b->add_mean) {
        values = std::string("update ") + UpdateName(*a) + " vs " + UpdateName(*b) +
                 (values.empty() ? "" : ", " + values);
      }
      if (!values.empty()) {
        return values + " on [" + std::to_string(offset + begin) + ", " +
               std::to_string(offset + end) + ") (" + SourceOf(*a) + " vs " + SourceOf(*b) + ")";
      }
    }
    if (a->end <= b->end) {
      ++a;
    } else {
      ++b;
    }
  }
  return std::string();
}

}  // namespace loco
