// loco::Worker over parameters in the caller's own memory (the span
// overloads, what a Python binding hands in): the same steps as the vector
// overloads, bit for bit, written in place and nowhere else; and a span of
// the wrong size refused with InvalidArgument, changing nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/worker.h"
#include "tests/client/worker_cluster.h"
#include "tests/common/random_batch.h"

namespace loco {
namespace {

using namespace cluster_fixture;  // NOLINT: the fixture of every test here

// Caller-owned memory for the model with a guard element on either side, so
// that a write outside the span shows.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t n) : data_(new float[n + 2]), n_(n) {
    data_[0] = data_[n + 1] = kGuard;
    for (size_t i = 0; i < n; ++i) data_[i + 1] = std::numeric_limits<float>::quiet_NaN();
  }
  std::span<float> span() { return {data_.get() + 1, n_}; }
  bool guards_intact() const {
    return std::memcmp(&data_[0], &kGuard, sizeof(float)) == 0 &&
           std::memcmp(&data_[n_ + 1], &kGuard, sizeof(float)) == 0;
  }
  // Bit-for-bit equality of the span's contents with `v`.
  bool Equals(const std::vector<float>& v) const {
    return v.size() == n_ && std::memcmp(data_.get() + 1, v.data(), n_ * sizeof(float)) == 0;
  }
  std::vector<float> Copy() const { return {data_.get() + 1, data_.get() + 1 + n_}; }

 private:
  static constexpr float kGuard = 12345.0f;
  std::unique_ptr<float[]> data_;
  size_t n_;
};

// Plain and overlapped steps with LoCo: a worker stepping on a span over
// caller memory ends with exactly the parameters of one stepping on a
// vector, on twin clusters.
TEST(WorkerSpanTest, StepsOnCallerMemoryEqualTheVectorOverloadsBitForBit) {
  Cluster vector_cluster, span_cluster;
  std::unique_ptr<Worker> on_vector = JoinedWorker(vector_cluster.Options(PushCodec::kLoco));
  std::unique_ptr<Worker> on_span = JoinedWorker(span_cluster.Options(PushCodec::kLoco));
  ASSERT_NE(on_vector, nullptr);
  ASSERT_NE(on_span, nullptr);
  EXPECT_EQ(on_span->num_elements(), kElements);
  const std::vector<float> init = Uniform(kElements, 41, -1, 1);
  std::vector<float> p_vector;
  GuardedBuffer p_span(kElements);
  ASSERT_TRUE(on_vector->InitParameters(init, &p_vector).ok());
  const Status initialized = on_span->InitParameters(init, p_span.span());
  ASSERT_TRUE(initialized.ok()) << initialized.ToString();
  EXPECT_TRUE(p_span.Equals(p_vector));

  std::vector<float> grads(kElements);
  for (uint64_t t = 0; t < 4; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<float> g = Uniform(kElements, 500 + t, -0.1f, 0.1f);
    auto r_vector = on_vector->Step(g, &p_vector);
    ASSERT_TRUE(r_vector.ok()) << r_vector.status().ToString();
    StatusOr<StepResult> r_span = InvalidArgument("not run");
    if (t % 2 == 0) {
      r_span = on_span->Step(g, p_span.span());
    } else {
      // The overlapped form: the gradient computed inside the step, into
      // caller memory too, the end first.
      r_span = on_span->Step(
          [&](const GradientReady& ready) -> Status {
            std::copy(g.begin() + kShardOffset[1], g.end(), grads.begin() + kShardOffset[1]);
            ready(kShardOffset[1]);
            std::copy(g.begin(), g.begin() + kShardOffset[1], grads.begin());
            ready(0);
            return Status::Ok();
          },
          grads, p_span.span());
    }
    ASSERT_TRUE(r_span.ok()) << r_span.status().ToString();
    EXPECT_EQ(r_span->push_wire_bytes, r_vector->push_wire_bytes);
    EXPECT_EQ(on_span->step(), on_vector->step());
    EXPECT_TRUE(p_span.Equals(p_vector));
    EXPECT_TRUE(p_span.guards_intact());
  }
  EXPECT_EQ(on_span->step(), 4u);
  EXPECT_TRUE(on_vector->Leave().ok());
  EXPECT_TRUE(on_span->Leave().ok());
}

// Spans of the wrong size: InvalidArgument, the caller's memory untouched,
// no step taken, and the worker steps normally afterwards.
TEST(WorkerSpanTest, WrongSizedSpansAreRefusedAndChangeNothing) {
  Cluster cluster;
  std::unique_ptr<Worker> w = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w, nullptr);
  const std::vector<float> init = Uniform(kElements, 43, -1, 1);
  GuardedBuffer params(kElements);

  // InitParameters: params or initial a size other than the model's.
  GuardedBuffer short_params(kElements - 1);
  const std::vector<float> untouched = short_params.Copy();
  Status s = w->InitParameters(init, short_params.span());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("params"), std::string::npos) << s.ToString();
  EXPECT_EQ(std::memcmp(short_params.Copy().data(), untouched.data(),
                        untouched.size() * sizeof(float)), 0);
  EXPECT_TRUE(short_params.guards_intact());
  s = w->InitParameters(std::span<const float>(init).first(kElements - 1), params.span());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  ASSERT_TRUE(w->InitParameters(init, params.span()).ok());
  EXPECT_TRUE(params.Equals(init));  // the only worker: the shards hold its offer

  const std::vector<float> before = params.Copy();
  const uint64_t version = cluster.server(0).service().Snapshot().version();
  const std::vector<float> g = Uniform(kElements, 44, -0.1f, 0.1f);
  // Step: params too short, too long, and grads too short, plain and overlapped.
  GuardedBuffer long_params(kElements + 1);
  for (std::span<float> wrong : {short_params.span(), long_params.span()}) {
    auto r = w->Step(g, wrong);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    bool computed = false;
    r = w->Step(
        [&](const GradientReady&) -> Status {
          computed = true;
          return Status::Ok();
        },
        g, wrong);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_FALSE(computed);
  }
  auto r = w->Step(std::span<const float>(g).first(kElements - 1), params.span());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_TRUE(short_params.guards_intact());
  EXPECT_TRUE(long_params.guards_intact());
  EXPECT_TRUE(params.Equals(before));
  EXPECT_EQ(w->step(), 0u);
  EXPECT_EQ(cluster.server(0).service().Snapshot().version(), version);
  EXPECT_EQ(w->traffic().steps, 0u);

  // Rejoin checks its state first: a worker that has not expired is refused
  // as such, whatever the sizes.
  EXPECT_EQ(w->Rejoin(init, short_params.span()).code(), StatusCode::kFailedPrecondition);

  // The refusals left nothing behind: the next step is an ordinary one.
  r = w->Step(g, params.span());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(w->step(), 1u);
  EXPECT_FALSE(params.Equals(before));
  EXPECT_TRUE(params.guards_intact());
  EXPECT_TRUE(w->Leave().ok());
}

}  // namespace
}  // namespace loco
