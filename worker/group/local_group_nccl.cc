#include "worker/group/local_group_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <set>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device.h"

namespace loco {
namespace {

Status NcclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::Ok();
  return Internal(std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

}  // namespace

struct NcclLocalGroup::Rank {
  int device = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  float* reduce_send = nullptr;  // N·chunk: the full gradient, chunk q = slice q
  float* reduce_recv = nullptr;  // chunk: this rank's slice of the mean
  float* gather_send = nullptr;  // chunk: this rank's slice
  float* gather_recv = nullptr;  // N·chunk: every rank's slice
};

StatusOr<std::unique_ptr<NcclLocalGroup>> NcclLocalGroup::Create(
    std::vector<int> devices, std::vector<LocalSlice> slices, size_t num_elements,
    std::chrono::milliseconds timeout) {
  LOCO_RETURN_IF_ERROR(ValidateSlices(slices, num_elements).Annotate("NcclLocalGroup"));
  if (devices.size() != slices.size()) {
    return InvalidArgument("NcclLocalGroup: " + std::to_string(devices.size()) +
                           " devices for " + std::to_string(slices.size()) +
                           " slices; expected one device per local rank");
  }
  if (timeout.count() < 1) {
    return InvalidArgument("NcclLocalGroup: timeout must be at least 1 ms");
  }
  const int available = cuda::DeviceCount();
  std::set<int> seen;
  for (int d : devices) {
    if (d < 0 || d >= available || !seen.insert(d).second) {
      return Unavailable("NcclLocalGroup: device " + std::to_string(d) +
                         " is not a distinct CUDA device of the " + std::to_string(available) +
                         " visible; --local-devices must not exceed the visible GPUs");
    }
  }
  std::unique_ptr<NcclLocalGroup> g(new NcclLocalGroup(std::move(slices), num_elements, timeout));
  LOCO_RETURN_IF_ERROR(g->Init(devices));
  return g;
}

NcclLocalGroup::NcclLocalGroup(std::vector<LocalSlice> slices, size_t num_elements,
                               std::chrono::milliseconds timeout)
    : LocalGroup(std::move(slices), num_elements, timeout) {
  for (const LocalSlice& s : slices_) chunk_ = std::max(chunk_, s.length);
}

Status NcclLocalGroup::Init(const std::vector<int>& devices) {
  const size_t n = devices.size();
  std::vector<ncclComm_t> comms(n);
  LOCO_RETURN_IF_ERROR(
      NcclStatus(ncclCommInitAll(comms.data(), static_cast<int>(n), devices.data()),
                 "ncclCommInitAll"));
  for (size_t r = 0; r < n; ++r) {
    ranks_.push_back(std::make_unique<Rank>());
    Rank& k = *ranks_.back();
    k.device = devices[r];
    k.comm = comms[r];
    LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(k.device));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    const size_t full = n * chunk_ * sizeof(float), part = chunk_ * sizeof(float);
    LOCO_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&k.reduce_send), full));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&k.reduce_recv), part));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&k.gather_send), part));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&k.gather_recv), full));
    // The padding past each slice is never written again: zero once.
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemset(k.reduce_send, 0, full));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemset(k.gather_send, 0, part));
  }
  return Status::Ok();
}

NcclLocalGroup::~NcclLocalGroup() {
  for (auto& k : ranks_) {
    (void)cudaSetDevice(k->device);
    if (k->stream != nullptr) (void)cudaStreamSynchronize(k->stream);
    if (k->comm != nullptr) (void)ncclCommDestroy(k->comm);
    for (float* p : {k->reduce_send, k->reduce_recv, k->gather_send, k->gather_recv}) {
      if (p != nullptr) (void)cudaFree(p);
    }
    if (k->stream != nullptr) (void)cudaStreamDestroy(k->stream);
  }
}

Status NcclLocalGroup::IssueOnAllDevices(bool reduce) {
  Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart");
  if (s.ok()) {
    for (auto& k : ranks_) {
      const ncclResult_t r =
          reduce ? ncclReduceScatter(k->reduce_send, k->reduce_recv, chunk_, ncclFloat, ncclAvg,
                                     k->comm, k->stream)
                 : ncclAllGather(k->gather_send, k->gather_recv, chunk_, ncclFloat, k->comm,
                                 k->stream);
      s = NcclStatus(r, reduce ? "ncclReduceScatter" : "ncclAllGather");
      if (!s.ok()) break;
    }
    // The group is closed even after a failed call, as NCCL requires.
    Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    if (s.ok()) s = end;
  }
  if (!s.ok()) barrier_.Abort(s);
  return s;
}

Status NcclLocalGroup::ReduceScatterMean(int rank, std::span<const float> grads,
                                         std::span<float> out) {
  const size_t expect_out = rank >= 0 && rank < size() ? slice(rank).length : 0;
  LOCO_RETURN_IF_ERROR(CheckCall("ReduceScatterMean", rank, grads.size(), num_elements_,
                                 out.size(), expect_out));
  Rank& k = *ranks_[static_cast<size_t>(rank)];
  Status staged = LOCO_CUDA_STATUS(cudaSetDevice(k.device));
  for (size_t q = 0; q < slices_.size() && staged.ok(); ++q) {
    staged = LOCO_CUDA_STATUS(cudaMemcpyAsync(k.reduce_send + q * chunk_,
                                              grads.data() + slices_[q].offset,
                                              slices_[q].length * sizeof(float),
                                              cudaMemcpyHostToDevice, k.stream));
  }
  if (!staged.ok()) barrier_.Abort(staged);
  LOCO_RETURN_IF_ERROR(barrier_.Arrive("ReduceScatterMean (staged)"));
  if (rank == 0) LOCO_RETURN_IF_ERROR(IssueOnAllDevices(/*reduce=*/true));
  LOCO_RETURN_IF_ERROR(barrier_.Arrive("ReduceScatterMean (issued)"));
  LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(k.device));
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data(), k.reduce_recv, out.size() * sizeof(float),
                                            cudaMemcpyDeviceToHost, k.stream));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(k.stream));
  return Status::Ok();
}

Status NcclLocalGroup::AllGather(int rank, std::span<const float> slice_in,
                                 std::span<float> full) {
  const size_t expect_in = rank >= 0 && rank < size() ? slice(rank).length : 0;
  LOCO_RETURN_IF_ERROR(
      CheckCall("AllGather", rank, slice_in.size(), expect_in, full.size(), num_elements_));
  Rank& k = *ranks_[static_cast<size_t>(rank)];
  Status staged = LOCO_CUDA_STATUS(cudaSetDevice(k.device));
  if (staged.ok()) {
    staged = LOCO_CUDA_STATUS(cudaMemcpyAsync(k.gather_send, slice_in.data(),
                                              slice_in.size() * sizeof(float),
                                              cudaMemcpyHostToDevice, k.stream));
  }
  if (!staged.ok()) barrier_.Abort(staged);
  LOCO_RETURN_IF_ERROR(barrier_.Arrive("AllGather (staged)"));
  if (rank == 0) LOCO_RETURN_IF_ERROR(IssueOnAllDevices(/*reduce=*/false));
  LOCO_RETURN_IF_ERROR(barrier_.Arrive("AllGather (issued)"));
  LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(k.device));
  for (size_t q = 0; q < slices_.size(); ++q) {
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(full.data() + slices_[q].offset,
                                              k.gather_recv + q * chunk_,
                                              slices_[q].length * sizeof(float),
                                              cudaMemcpyDeviceToHost, k.stream));
  }
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(k.stream));
  return Status::Ok();
}

}  // namespace loco
