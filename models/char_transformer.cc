#include "models/char_transformer.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "models/gemm.h"

namespace loco {
namespace {

constexpr float kLnEps = 1e-5f;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/π)

// out[rows×oc] = inp[rows×ic] · wᵀ + bias, w [oc×ic].
void MatmulForward(float* out, const float* inp, const float* w, const float* bias, size_t rows,
                   size_t ic, size_t oc) {
  for (size_t r = 0; r < rows; ++r) std::copy(bias, bias + oc, out + r * oc);
  Gemm(false, true, rows, oc, ic, inp, ic, w, ic, 1.0f, out, oc);
}

// Accumulates dinp += dout · w, dw += doutᵀ · inp, dbias += Σ_rows dout.
void MatmulBackward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                    const float* w, size_t rows, size_t ic, size_t oc) {
  Gemm(false, false, rows, ic, oc, dout, oc, w, ic, 1.0f, dinp, ic);
  Gemm(true, false, oc, ic, rows, dout, oc, inp, ic, 1.0f, dw, ic);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < oc; ++j) dbias[j] += dout[r * oc + j];
  }
}

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                      const float* b, size_t rows, size_t c) {
  for (size_t r = 0; r < rows; ++r) {
    const float* x = inp + r * c;
    double m = 0;
    for (size_t i = 0; i < c; ++i) m += x[i];
    m /= static_cast<double>(c);
    double v = 0;
    for (size_t i = 0; i < c; ++i) v += (x[i] - m) * (x[i] - m);
    v /= static_cast<double>(c);
    const float s = static_cast<float>(1.0 / std::sqrt(v + kLnEps));
    const float mf = static_cast<float>(m);
    float* o = out + r * c;
    for (size_t i = 0; i < c; ++i) o[i] = (x[i] - mf) * s * w[i] + b[i];
    mean[r] = mf;
    rstd[r] = s;
  }
}

// Accumulates dinp, dw, db from dout (llm.c's layernorm_backward).
void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, const float* mean, const float* rstd, size_t rows,
                       size_t c) {
  for (size_t r = 0; r < rows; ++r) {
    const float* x = inp + r * c;
    const float* d = dout + r * c;
    float dnorm_mean = 0, dnorm_norm_mean = 0;
    for (size_t i = 0; i < c; ++i) {
      const float norm = (x[i] - mean[r]) * rstd[r];
      const float dnorm = w[i] * d[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<float>(c);
    dnorm_norm_mean /= static_cast<float>(c);
    float* dx = dinp + r * c;
    for (size_t i = 0; i < c; ++i) {
      const float norm = (x[i] - mean[r]) * rstd[r];
      const float dnorm = w[i] * d[i];
      db[i] += d[i];
      dw[i] += norm * d[i];
      dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[r];
    }
  }
}

// Causal multi-head attention over qkv [n·T × 3C] (q, k, v side by side);
// att [n × NH × T × T] keeps the softmax weights (0 above the diagonal).
void AttentionForward(float* out, float* att, const float* qkv, size_t n, size_t t_len, size_t c,
                      size_t nh) {
  const size_t hs = c / nh, c3 = 3 * c;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (size_t b = 0; b < n; ++b) {
    for (size_t t = 0; t < t_len; ++t) {
      for (size_t h = 0; h < nh; ++h) {
        const float* q = qkv + (b * t_len + t) * c3 + h * hs;
        float* a = att + ((b * nh + h) * t_len + t) * t_len;
        float mx = -INFINITY;
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (b * t_len + t2) * c3 + c + h * hs;
          float dot = 0;
          for (size_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          a[t2] = dot * scale;
          mx = std::max(mx, a[t2]);
        }
        float sum = 0;
        for (size_t t2 = 0; t2 <= t; ++t2) {
          a[t2] = std::exp(a[t2] - mx);
          sum += a[t2];
        }
        const float inv = 1.0f / sum;
        for (size_t t2 = 0; t2 < t_len; ++t2) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
        float* o = out + (b * t_len + t) * c + h * hs;
        std::fill(o, o + hs, 0.0f);
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (b * t_len + t2) * c3 + 2 * c + h * hs;
          for (size_t i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
        }
      }
    }
  }
}

// Accumulates dqkv from dout; scratch holds 2·T floats.
void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att,
                       size_t n, size_t t_len, size_t c, size_t nh, float* scratch) {
  const size_t hs = c / nh, c3 = 3 * c;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* datt = scratch;
  float* dpre = scratch + t_len;
  for (size_t b = 0; b < n; ++b) {
    for (size_t t = 0; t < t_len; ++t) {
      for (size_t h = 0; h < nh; ++h) {
        const float* a = att + ((b * nh + h) * t_len + t) * t_len;
        const float* d = dout + (b * t_len + t) * c + h * hs;
        const float* q = qkv + (b * t_len + t) * c3 + h * hs;
        float* dq = dqkv + (b * t_len + t) * c3 + h * hs;
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (b * t_len + t2) * c3 + 2 * c + h * hs;
          float* dv = dqkv + (b * t_len + t2) * c3 + 2 * c + h * hs;
          float dot = 0;
          for (size_t i = 0; i < hs; ++i) {
            dot += v[i] * d[i];
            dv[i] += a[t2] * d[i];
          }
          datt[t2] = dot;
        }
        float weighted = 0;
        for (size_t t2 = 0; t2 <= t; ++t2) weighted += a[t2] * datt[t2];
        for (size_t t2 = 0; t2 <= t; ++t2) dpre[t2] = a[t2] * (datt[t2] - weighted);
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (b * t_len + t2) * c3 + c + h * hs;
          float* dk = dqkv + (b * t_len + t2) * c3 + c + h * hs;
          const float g = dpre[t2] * scale;
          for (size_t i = 0; i < hs; ++i) {
            dq[i] += g * k[i];
            dk[i] += g * q[i];
          }
        }
      }
    }
  }
}

// GELU, tanh approximation (GPT-2's).
void GeluForward(float* out, const float* inp, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + 0.044715f * x * x * x)));
  }
}

// d *= gelu'(inp), in place.
void GeluBackward(float* d, const float* inp, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    const float th = std::tanh(kGeluScale * (x + 0.044715f * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float local = 0.5f * (1.0f + th) +
                        0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    d[i] *= local;
  }
}

}  // namespace

StatusOr<CharTransformer> CharTransformer::Create(const CharTransformerConfig& c) {
  auto bad = [](const std::string& what) { return InvalidArgument("CharTransformer: " + what); };
  if (c.vocab < 2 || c.vocab > 256) {
    return bad("vocab " + std::to_string(c.vocab) + " is out of range; expected 2 .. 256 (bytes)");
  }
  if (c.context < 1 || c.context > 4096) {
    return bad("context " + std::to_string(c.context) + " is out of range; expected 1 .. 4096");
  }
  if (c.layers < 1 || c.layers > 64) {
    return bad("layers " + std::to_string(c.layers) + " is out of range; expected 1 .. 64");
  }
  if (c.channels < 1 || c.channels > 4096 || c.heads < 1 || c.channels % c.heads != 0) {
    return bad("channels " + std::to_string(c.channels) + " with " + std::to_string(c.heads) +
               " heads: expected 1 .. 4096 channels, a multiple of the head count");
  }
  return CharTransformer(c);
}

CharTransformer::CharTransformer(const CharTransformerConfig& config) : cfg_(config) {
  const size_t c = cfg_.channels;
  size_t off = 0;
  auto add = [&](const std::string& name, size_t rows, size_t cols) {
    tensors_.push_back({name, off, rows * cols, rows, cols});
    off += rows * cols;
    return tensors_.back().offset;
  };
  wte_ = add("wte", cfg_.vocab, c);
  wpe_ = add("wpe", cfg_.context, c);
  for (size_t l = 0; l < cfg_.layers; ++l) {
    const std::string p = std::to_string(l) + ".";
    LayerOffsets o{};
    o.ln1w = add(p + "ln1.w", 1, c);
    o.ln1b = add(p + "ln1.b", 1, c);
    o.qkvw = add(p + "qkv.w", 3 * c, c);
    o.qkvb = add(p + "qkv.b", 1, 3 * c);
    o.projw = add(p + "proj.w", c, c);
    o.projb = add(p + "proj.b", 1, c);
    o.ln2w = add(p + "ln2.w", 1, c);
    o.ln2b = add(p + "ln2.b", 1, c);
    o.fcw = add(p + "fc.w", 4 * c, c);
    o.fcb = add(p + "fc.b", 1, 4 * c);
    o.fcprojw = add(p + "fcproj.w", c, 4 * c);
    o.fcprojb = add(p + "fcproj.b", 1, c);
    layer_.push_back(o);
  }
  lnfw_ = add("lnf.w", 1, c);
  lnfb_ = add("lnf.b", 1, c);
  num_params_ = off;
  acts_.resize(cfg_.layers);
}

std::vector<float> CharTransformer::InitialParameters(uint64_t seed) const {
  std::vector<float> p(num_params_, 0.0f);
  std::mt19937_64 rng(seed);
  // Box–Muller on 53-bit uniforms: portable, unlike std::normal_distribution.
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  auto normal = [&](double stddev) {
    const double u1 = uniform(), u2 = uniform();
    return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  };
  auto fill = [&](size_t off, size_t count, double stddev) {
    for (size_t i = 0; i < count; ++i) p[off + i] = normal(stddev);
  };
  const size_t c = cfg_.channels;
  const double resid_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.layers));
  fill(wte_, cfg_.vocab * c, 0.02);
  fill(wpe_, cfg_.context * c, 0.02);
  for (const LayerOffsets& o : layer_) {
    std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(o.ln1w), c, 1.0f);
    std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(o.ln2w), c, 1.0f);
    fill(o.qkvw, 3 * c * c, 0.02);
    fill(o.projw, c * c, resid_std);
    fill(o.fcw, 4 * c * c, 0.02);
    fill(o.fcprojw, 4 * c * c, resid_std);
  }
  std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(lnfw_), c, 1.0f);
  return p;
}

Status CharTransformer::CheckBatch(std::span<const float> params,
                                   std::span<const uint8_t> sequences) const {
  if (params.size() != num_params_) {
    return InvalidArgument("CharTransformer: params has " + std::to_string(params.size()) +
                           " elements; the model has " + std::to_string(num_params_));
  }
  const size_t s = sequence_length();
  if (sequences.empty() || sequences.size() % s != 0) {
    return InvalidArgument("CharTransformer: " + std::to_string(sequences.size()) +
                           " tokens; expected a non-empty multiple of context + 1 = " +
                           std::to_string(s));
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i] >= cfg_.vocab) {
      return InvalidArgument("CharTransformer: token " + std::to_string(sequences[i]) +
                             " at index " + std::to_string(i) + " is not in the vocabulary [0, " +
                             std::to_string(cfg_.vocab) + ")");
    }
  }
  return Status::Ok();
}

double CharTransformer::Forward(const float* params, const uint8_t* seqs, size_t n,
                                size_t* correct) {
  const size_t t_len = cfg_.context, c = cfg_.channels, v = cfg_.vocab, s = sequence_length();
  const size_t bt = n * t_len;
  encoded_.resize(bt * c);
  for (size_t b = 0; b < n; ++b) {
    for (size_t t = 0; t < t_len; ++t) {
      const float* te = params + wte_ + seqs[b * s + t] * c;
      const float* pe = params + wpe_ + t * c;
      float* o = encoded_.data() + (b * t_len + t) * c;
      for (size_t i = 0; i < c; ++i) o[i] = te[i] + pe[i];
    }
  }
  const float* x = encoded_.data();
  for (size_t l = 0; l < cfg_.layers; ++l) {
    const LayerOffsets& o = layer_[l];
    LayerActs& a = acts_[l];
    a.ln1.resize(bt * c);
    a.ln1_mean.resize(bt);
    a.ln1_rstd.resize(bt);
    a.qkv.resize(bt * 3 * c);
    a.att.resize(n * cfg_.heads * t_len * t_len);
    a.atty.resize(bt * c);
    a.res2.resize(bt * c);
    a.ln2.resize(bt * c);
    a.ln2_mean.resize(bt);
    a.ln2_rstd.resize(bt);
    a.fch.resize(bt * 4 * c);
    a.fch_gelu.resize(bt * 4 * c);
    a.res3.resize(bt * c);
    LayerNormForward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, params + o.ln1w,
                     params + o.ln1b, bt, c);
    MatmulForward(a.qkv.data(), a.ln1.data(), params + o.qkvw, params + o.qkvb, bt, c, 3 * c);
    AttentionForward(a.atty.data(), a.att.data(), a.qkv.data(), n, t_len, c, cfg_.heads);
    MatmulForward(a.res2.data(), a.atty.data(), params + o.projw, params + o.projb, bt, c, c);
    for (size_t i = 0; i < bt * c; ++i) a.res2[i] += x[i];
    LayerNormForward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                     params + o.ln2w, params + o.ln2b, bt, c);
    MatmulForward(a.fch.data(), a.ln2.data(), params + o.fcw, params + o.fcb, bt, c, 4 * c);
    GeluForward(a.fch_gelu.data(), a.fch.data(), bt * 4 * c);
    MatmulForward(a.res3.data(), a.fch_gelu.data(), params + o.fcprojw, params + o.fcprojb, bt,
                  4 * c, c);
    for (size_t i = 0; i < bt * c; ++i) a.res3[i] += a.res2[i];
    x = a.res3.data();
  }
  lnf_.resize(bt * c);
  lnf_mean_.resize(bt);
  lnf_rstd_.resize(bt);
  LayerNormForward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, params + lnfw_,
                   params + lnfb_, bt, c);
  probs_.resize(bt * v);
  Gemm(false, true, bt, v, c, lnf_.data(), c, params + wte_, c, 0.0f, probs_.data(), v);
  double loss = 0;
  for (size_t b = 0; b < n; ++b) {
    for (size_t t = 0; t < t_len; ++t) {
      float* row = probs_.data() + (b * t_len + t) * v;
      const size_t target = seqs[b * s + t + 1];
      const size_t arg = static_cast<size_t>(std::max_element(row, row + v) - row);
      if (correct != nullptr && arg == target) ++*correct;
      const float mx = row[arg];
      double sum = 0;
      for (size_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
      loss += std::log(sum) - (static_cast<double>(row[target]) - mx);
      for (size_t j = 0; j < v; ++j) {
        row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - mx) / sum);
      }
    }
  }
  return loss;
}

void CharTransformer::Backward(const float* params, const uint8_t* seqs, size_t n, float* grads) {
  const size_t t_len = cfg_.context, c = cfg_.channels, v = cfg_.vocab, s = sequence_length();
  const size_t bt = n * t_len;
  // d(mean CE)/d(logits) = (softmax − onehot) / (n·T).
  dlogits_ = probs_;
  const float inv = 1.0f / static_cast<float>(bt);
  for (size_t b = 0; b < n; ++b) {
    for (size_t t = 0; t < t_len; ++t) {
      float* row = dlogits_.data() + (b * t_len + t) * v;
      row[seqs[b * s + t + 1]] -= 1.0f;
      for (size_t j = 0; j < v; ++j) row[j] *= inv;
    }
  }
  dln_.assign(bt * c, 0.0f);
  Gemm(true, false, v, c, bt, dlogits_.data(), v, lnf_.data(), c, 1.0f, grads + wte_, c);
  Gemm(false, false, bt, c, v, dlogits_.data(), v, params + wte_, c, 0.0f, dln_.data(), c);
  const float* x_last = cfg_.layers > 0 ? acts_.back().res3.data() : encoded_.data();
  dres_.assign(bt * c, 0.0f);
  LayerNormBackward(dres_.data(), grads + lnfw_, grads + lnfb_, dln_.data(), x_last,
                    params + lnfw_, lnf_mean_.data(), lnf_rstd_.data(), bt, c);
  dpre_.resize(2 * t_len);
  // dres_ holds d(loss)/d(the residual stream) as it flows back through the layers.
  for (size_t l = cfg_.layers; l-- > 0;) {
    const LayerOffsets& o = layer_[l];
    const LayerActs& a = acts_[l];
    const float* x_in = l == 0 ? encoded_.data() : acts_[l - 1].res3.data();
    dfch_.assign(bt * 4 * c, 0.0f);
    MatmulBackward(dfch_.data(), grads + o.fcprojw, grads + o.fcprojb, dres_.data(),
                   a.fch_gelu.data(), params + o.fcprojw, bt, 4 * c, c);
    GeluBackward(dfch_.data(), a.fch.data(), bt * 4 * c);
    dln_.assign(bt * c, 0.0f);
    MatmulBackward(dln_.data(), grads + o.fcw, grads + o.fcb, dfch_.data(), a.ln2.data(),
                   params + o.fcw, bt, c, 4 * c);
    LayerNormBackward(dres_.data(), grads + o.ln2w, grads + o.ln2b, dln_.data(), a.res2.data(),
                      params + o.ln2w, a.ln2_mean.data(), a.ln2_rstd.data(), bt, c);
    datty_.assign(bt * c, 0.0f);
    MatmulBackward(datty_.data(), grads + o.projw, grads + o.projb, dres_.data(), a.atty.data(),
                   params + o.projw, bt, c, c);
    dqkv_.assign(bt * 3 * c, 0.0f);
    AttentionBackward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(), n, t_len, c,
                      cfg_.heads, dpre_.data());
    dln_.assign(bt * c, 0.0f);
    MatmulBackward(dln_.data(), grads + o.qkvw, grads + o.qkvb, dqkv_.data(), a.ln1.data(),
                   params + o.qkvw, bt, c, 3 * c);
    LayerNormBackward(dres_.data(), grads + o.ln1w, grads + o.ln1b, dln_.data(), x_in,
                      params + o.ln1w, a.ln1_mean.data(), a.ln1_rstd.data(), bt, c);
  }
  for (size_t b = 0; b < n; ++b) {
    for (size_t t = 0; t < t_len; ++t) {
      const float* d = dres_.data() + (b * t_len + t) * c;
      float* dte = grads + wte_ + seqs[b * s + t] * c;
      float* dpe = grads + wpe_ + t * c;
      for (size_t i = 0; i < c; ++i) {
        dte[i] += d[i];
        dpe[i] += d[i];
      }
    }
  }
}

StatusOr<double> CharTransformer::LossAndGradient(std::span<const float> params,
                                                  std::span<const uint8_t> sequences,
                                                  std::vector<float>* grads) {
  LOCO_RETURN_IF_ERROR(CheckBatch(params, sequences));
  const size_t n = sequences.size() / sequence_length();
  const double loss = Forward(params.data(), sequences.data(), n, nullptr) /
                      static_cast<double>(n * cfg_.context);
  grads->assign(num_params_, 0.0f);
  Backward(params.data(), sequences.data(), n, grads->data());
  return loss;
}

StatusOr<EvalResult> CharTransformer::Evaluate(std::span<const float> params,
                                               std::span<const uint8_t> sequences, size_t chunk) {
  LOCO_RETURN_IF_ERROR(CheckBatch(params, sequences));
  if (chunk == 0) return InvalidArgument("CharTransformer::Evaluate: chunk must be >= 1");
  const size_t s = sequence_length(), total = sequences.size() / s;
  size_t correct = 0;
  double loss = 0;
  for (size_t start = 0; start < total; start += chunk) {
    const size_t n = std::min(chunk, total - start);
    loss += Forward(params.data(), sequences.data() + start * s, n, &correct);
  }
  const double positions = static_cast<double>(total * cfg_.context);
  return EvalResult{static_cast<double>(correct) / positions, loss / positions};
}

}  // namespace loco
