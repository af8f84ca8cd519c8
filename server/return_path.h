// ReturnPath: how a shard's parameters travel back to the workers.
//
//   fp32   every pull gets the fp32 master.
//   bf16   every pull gets the master rounded to bf16 (cpu::CastFp32ToBf16),
//          except forced-full pulls (want_full, or have_any = false), which
//          get fp32.
//   delta  the server keeps a replica W of what the workers hold. When
//          version v is applied: d = P_v − W_{v−1}, payload = Q(d) (block
//          quantization, nearest rounding), W_v = W_{v−1} + D(payload). The
//          replica therefore carries the return path's error feedback:
//          P − W is the server's error state; it is the rounding error of
//          the latest delta only and never accumulates. Every
//          full_sync_every versions W := P and no delta is cached, so every
//          worker receives an exact fp32 copy of the master.
//          A pull with have_any and have_version == version − 1 gets the
//          cached delta for `version`; every other pull (joining worker,
//          want_full, an older version, a sync version) gets W in fp32, so
//          every worker holds the same W and can follow the next delta.
//
// A worker applying the delta must compute W_{v−1} + code·scale in fp32
// (one multiply, one add per element) to stay bit-identical to W_v.
//
// Not thread-safe: the owner serialises access.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/loco.pb.h"
#include "common/shard_layout.h"
#include "server/answer_spares.h"
#include "server/payload_buffers.h"

namespace loco {

enum class PullCodec { kFp32, kBf16, kDelta };

StatusOr<PullCodec> ParsePullCodec(const std::string& name);  // "fp32" | "bf16" | "delta"
const char* PullCodecName(PullCodec codec);

struct ReturnPathOptions {
  PullCodec codec = PullCodec::kDelta;
  int bits = 8;                    // delta codes: 2, 4 or 8
  int block_size = 128;            // delta blocks: multiple of 32 in [32, 4096]
  uint64_t full_sync_every = 50;   // R; 0 = only on join/request
  // Threads the delta's encoding (OnApplied) runs on; the codes, scales and
  // replica are the same for every count. 0 is taken as 1.
  uint32_t threads = 1;
};

class ReturnPath {
 public:
  // `buffers` (may be empty or expire): where the fp32 answer's buffer
  // comes from, and goes back to when the last pull that sent it lets go.
  explicit ReturnPath(ReturnPathOptions options, std::weak_ptr<PayloadBuffers> buffers = {})
      : options_(options), buffers_(std::move(buffers)) {}
  static Status ValidateOptions(const ReturnPathOptions& options);

  // The master is about to change (a step is being applied): drops this
  // version's bodies, so that they are not held while the step computes.
  // Pulls still sending them keep their own references.
  void OnApplying();
  // The owner expects no more pulls of this version (every worker of the
  // step has its answer, or the next step's pushes began): drops the fp32
  // and bf16 bodies, so that they are not held while the next step's pushes
  // arrive. A later pull makes them again, identical. The delta's codes
  // stay: they moved the replica and cannot be made again.
  void ReleaseRemakeableBodies();
  // The shard's parameters were (re)set to `params` at `version`: W := P.
  void Reset(const std::vector<float>& params, uint64_t version);
  // The shard was restored from a checkpoint: W := `replica` (the saved
  // replica; the master when it is empty or of another size). Workers may
  // hold copies from before the restart, so the next applied version is a
  // full sync (no delta against a W they might not share).
  void Restore(const std::vector<float>& params, std::vector<float> replica);
  // The master moved to `params` at `version` (one step after the previous
  // call). Updates W and the cached delta (delta codec) or makes the bf16
  // copy (bf16 codec). The same as BeginAnswer, EncodeAnswerRange over
  // every chunk, FinishAnswer.
  Status OnApplied(const std::vector<float>& params, uint64_t version);

  // The next version's answer made in parts, for a step that encodes each
  // piece as soon as AdamW has made that piece of the master final, so that
  // waiting pulls can send it while the step goes on: the delta (delta
  // codec; it also moves W) or the bf16 copy (bf16 codec).
  //
  // BeginAnswer: `version` (of `n` elements) is about to be applied. When
  // its answer can be made in parts (a delta with no full sync due, or a
  // bf16 copy), allocates the buffers it will be encoded into and returns
  // them (the owner may share them with pulls; a range's bytes are final
  // once its EncodeAnswerRange returned OK): `data` (codes, or bf16 values)
  // and `scales` (null for bf16). Otherwise returns null buffers and, for
  // the delta codec, FinishAnswer sets W := P. Call after OnApplying.
  struct AnswerBuffers {
    std::shared_ptr<std::string> data, scales;  // null data: no answer in parts
  };
  [[nodiscard]] AnswerBuffers BeginAnswer(size_t n, uint64_t version);
  // Elements per call of EncodeAnswerRange must be whole multiples of this,
  // except at the end of the shard.
  size_t answer_block() const {
    return options_.codec == PullCodec::kDelta ? static_cast<size_t>(options_.block_size) : 1;
  }
  // Encodes [begin, begin + count) of the answer from `params`, the new
  // master, final in that range: the delta P − W's codes and scales (and
  // moves W there), or the bf16 values. Calls for disjoint ranges may run
  // concurrently. Fails (Internal) on non-finite deltas.
  [[nodiscard]] Status EncodeAnswerRange(const float* params, size_t begin, size_t count);
  // Ends the version. Delta codec: caches the delta when BeginAnswer gave
  // buffers, every range was encoded and `encoded` is OK; otherwise W :=
  // params (a full sync: correct, only larger), returning `encoded`
  // annotated. bf16 codec: with buffers and `encoded` OK they become the
  // version's bf16 body, which every later pull of it shares (the same
  // bytes a pull would have made); otherwise the first pull makes it.
  Status FinishAnswer(const std::vector<float>& params, uint64_t version, Status encoded);
  // The step between BeginAnswer and FinishAnswer was not applied: drops the
  // buffers; W stays, and the next applied version is a full sync.
  void CancelAnswer();

  // The bytes of a pull answer (the payload's data and scales), shared,
  // immutable, by every pull of one version: the fp32 copy, the bf16 copy,
  // the delta's codes and scales. Each is made once per version, on the
  // first pull that needs it, and kept until the next version. The owner
  // sends them after releasing its lock, either as slices that reference
  // them (PullResponseToWire) or copied into a message (Attach), so that W
  // concurrent pulls neither encode W times nor copy under the lock.
  struct SharedBody {
    std::shared_ptr<const std::string> data;    // never null after Encode
    std::shared_ptr<const std::string> scales;  // null: no scales
  };

  // Fills `out` for `request` given the master `params` at `version`: every
  // field, except the bytes returned in SharedBody. Call under the owner's
  // lock; the result stays valid after it.
  [[nodiscard]] SharedBody Encode(const v1::PullRequest& request,
                                  const std::vector<float>& params, uint64_t version,
                                  ShardRange range, v1::PullResponse* out);
  // Fills `out` as Encode does for the answer BeginAnswer made buffers for
  // (the delta, or the bf16 copy) of `version`: every field but the data
  // and scales.
  void AnswerHeader(uint64_t version, ShardRange range, v1::PullResponse* out) const;
  // Copies `body` into `out`'s payload. Needs no lock.
  static void Attach(const SharedBody& body, v1::PullResponse* out);

  const ReturnPathOptions& options() const { return options_; }
  // The replica W (delta codec; empty otherwise).
  const std::vector<float>& replica() const { return replica_; }
  // Memory kept between answers for the next one (AnswerSpares).
  size_t answer_spare_bytes() const { return spares_->spare_bytes(); }
  // Version whose delta is cached; 0 when none.
  uint64_t delta_version() const { return delta_version_; }

 private:
  // Fills `out`'s fields for a full fp32 copy of `values` (the master, or
  // the replica for the delta codec: one source per codec) and returns the
  // copy, made once per version.
  std::shared_ptr<const std::string> EncodeFp32(const std::vector<float>& values,
                                                uint64_t version, ShardRange range,
                                                v1::Payload* out);

  ReturnPathOptions options_;
  const std::weak_ptr<PayloadBuffers> buffers_;
  // The bf16 copies' and the deltas' buffers, reused from version to version.
  const std::shared_ptr<AnswerSpares> spares_ = AnswerSpares::Create();
  std::vector<float> replica_;
  uint64_t delta_version_ = 0;
  // The master rounded to bf16 for `version` (bf16 codec): 2 bytes per
  // parameter, made by the first pull of the version instead of one cast
  // per pull.
  std::shared_ptr<const std::string> Bf16Body(const std::vector<float>& params, uint64_t version);

  bool full_sync_next_ = false;  // set by Restore, cleared by the next OnApplied
  std::shared_ptr<const std::string> bf16_;
  uint64_t bf16_version_ = 0;
  // The fp32 copy of `fp32_version_`, made by the first pull that wanted one.
  std::shared_ptr<const std::string> fp32_;
  uint64_t fp32_version_ = 0;
  // Between BeginAnswer and FinishAnswer: the buffers being encoded (the
  // delta's codes and scales, or the bf16 copy in pending_data_).
  std::shared_ptr<std::string> pending_data_, pending_scales_;
  std::shared_ptr<const std::string> delta_codes_;
  std::shared_ptr<const std::string> delta_scales_;  // fp32 per block, raw bytes
};

}  // namespace loco
