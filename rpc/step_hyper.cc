#include "rpc/step_hyper.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace loco {
namespace {

// A finite double beyond fp32's range would be undefined behaviour to
// convert; infinities and NaN convert as themselves and fail the kernels'
// checks with their own messages.
Status CheckFitsFloat(const char* field, double value) {
  if (std::isfinite(value) && std::fabs(value) > std::numeric_limits<float>::max()) {
    return InvalidArgument(std::string(field) + " " + ShortestDouble(value) +
                           " is beyond fp32's range (the step is applied in fp32)");
  }
  return Status::Ok();
}

}  // namespace

std::string ShortestFloat(float value) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  return std::string(buf, end);
}

std::string ShortestDouble(double value) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  return std::string(buf, end);
}

std::string HyperGroupName(int index, const v1::HyperGroup& group) {
  return "hyper group " + std::to_string(index) + " [" + std::to_string(group.begin()) + ", " +
         std::to_string(group.end()) + ")";
}

StatusOr<AdamWParams> HyperGroupParams(const v1::HyperGroup& group) {
  LOCO_RETURN_IF_ERROR(CheckFitsFloat("lr", group.lr()));
  LOCO_RETURN_IF_ERROR(CheckFitsFloat("beta1", group.beta1()));
  LOCO_RETURN_IF_ERROR(CheckFitsFloat("beta2", group.beta2()));
  LOCO_RETURN_IF_ERROR(CheckFitsFloat("eps", group.eps()));
  LOCO_RETURN_IF_ERROR(CheckFitsFloat("weight_decay", group.weight_decay()));
  AdamWParams params;
  params.lr = static_cast<float>(group.lr());
  params.beta1 = static_cast<float>(group.beta1());
  params.beta2 = static_cast<float>(group.beta2());
  params.eps = static_cast<float>(group.eps());
  params.weight_decay = static_cast<float>(group.weight_decay());
  params.max_grad_norm = 0.0f;
  LOCO_RETURN_IF_ERROR(ValidateAdamWParams(params));
  return params;
}

Status ValidateStepHyper(const v1::StepHyper& hyper) {
  const int n = hyper.groups_size();
  if (static_cast<size_t>(n) > kMaxHyperGroups) {
    return InvalidArgument("the step's hyper-parameters have " +
                           std::to_string(static_cast<uint64_t>(n)) + " groups; at most " +
                           std::to_string(kMaxHyperGroups) +
                           " are accepted (merge neighbouring groups with the same values)");
  }
  for (int i = 0; i < n; ++i) {
    const v1::HyperGroup& group = hyper.groups(i);
    if (group.begin() >= group.end()) {
      return InvalidArgument(HyperGroupName(i, group) + " is empty or reversed: begin must be "
                             "below end");
    }
    if (i > 0 && group.begin() < hyper.groups(i - 1).end()) {
      return InvalidArgument(HyperGroupName(i, group) + " begins before " +
                             HyperGroupName(i - 1, hyper.groups(i - 1)) + " ends: groups must "
                             "be sorted by begin and must not overlap");
    }
    if (!v1::HyperUpdate_IsValid(group.update())) {
      return InvalidArgument(HyperGroupName(i, group) + ": update " +
                             std::to_string(group.update()) + " is unknown (0 = ADAMW, "
                             "1 = ADD_MEAN)");
    }
    auto params = HyperGroupParams(group);
    if (!params.ok()) return params.status().Annotate(HyperGroupName(i, group));
  }
  return Status::Ok();
}

}  // namespace loco
