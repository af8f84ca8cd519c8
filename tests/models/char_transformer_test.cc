// CharTransformer against an independent double-precision reference of the
// same network (written from the definition, plain loops), and its gradient
// against central finite differences of that reference. Also TextCorpus's
// deterministic split.
#include "models/char_transformer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "data/text_corpus.h"

namespace loco {
namespace {

using Vec = std::vector<double>;

const TensorInfo& Find(const CharTransformer& m, const std::string& name) {
  for (const TensorInfo& t : m.tensors()) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return m.tensors().front();
}

// out[r] = LayerNorm(x[r]) over c features.
Vec RefLayerNorm(const Vec& x, size_t rows, size_t c, const double* w, const double* b) {
  Vec out(x.size());
  for (size_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < c; ++i) mean += x[r * c + i];
    mean /= static_cast<double>(c);
    for (size_t i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
    var /= static_cast<double>(c);
    for (size_t i = 0; i < c; ++i) {
      out[r * c + i] = (x[r * c + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
  }
  return out;
}

// out = x · wᵀ + b, w [oc × ic].
Vec RefLinear(const Vec& x, size_t rows, size_t ic, size_t oc, const double* w, const double* b) {
  Vec out(rows * oc);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < oc; ++o) {
      double s = b[o];
      for (size_t i = 0; i < ic; ++i) s += x[r * ic + i] * w[o * ic + i];
      out[r * oc + o] = s;
    }
  }
  return out;
}

// Mean next-token cross-entropy of the model defined in char_transformer.h,
// computed in double from the definition.
double RefLoss(const CharTransformer& m, const Vec& p, const std::vector<uint8_t>& seqs) {
  const CharTransformerConfig& cfg = m.config();
  const size_t t_len = cfg.context, c = cfg.channels, nh = cfg.heads, hs = c / nh;
  const size_t s = t_len + 1, n = seqs.size() / s;
  auto at = [&](const std::string& name) { return p.data() + Find(m, name).offset; };
  double loss = 0;
  for (size_t b = 0; b < n; ++b) {
    Vec x(t_len * c);
    for (size_t t = 0; t < t_len; ++t) {
      for (size_t i = 0; i < c; ++i) {
        x[t * c + i] = at("wte")[seqs[b * s + t] * c + i] + at("wpe")[t * c + i];
      }
    }
    for (size_t l = 0; l < cfg.layers; ++l) {
      const std::string pre = std::to_string(l) + ".";
      Vec h = RefLayerNorm(x, t_len, c, at(pre + "ln1.w"), at(pre + "ln1.b"));
      Vec qkv = RefLinear(h, t_len, c, 3 * c, at(pre + "qkv.w"), at(pre + "qkv.b"));
      Vec y(t_len * c, 0.0);
      for (size_t hd = 0; hd < nh; ++hd) {
        for (size_t t = 0; t < t_len; ++t) {
          Vec score(t + 1);
          double mx = -1e300;
          for (size_t u = 0; u <= t; ++u) {
            double d = 0;
            for (size_t i = 0; i < hs; ++i) {
              d += qkv[t * 3 * c + hd * hs + i] * qkv[u * 3 * c + c + hd * hs + i];
            }
            score[u] = d / std::sqrt(static_cast<double>(hs));
            mx = std::max(mx, score[u]);
          }
          double z = 0;
          for (double& v : score) z += (v = std::exp(v - mx));
          for (size_t u = 0; u <= t; ++u) {
            for (size_t i = 0; i < hs; ++i) {
              y[t * c + hd * hs + i] += score[u] / z * qkv[u * 3 * c + 2 * c + hd * hs + i];
            }
          }
        }
      }
      Vec proj = RefLinear(y, t_len, c, c, at(pre + "proj.w"), at(pre + "proj.b"));
      for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
      h = RefLayerNorm(x, t_len, c, at(pre + "ln2.w"), at(pre + "ln2.b"));
      Vec f = RefLinear(h, t_len, c, 4 * c, at(pre + "fc.w"), at(pre + "fc.b"));
      for (double& v : f) {
        v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      }
      Vec out = RefLinear(f, t_len, 4 * c, c, at(pre + "fcproj.w"), at(pre + "fcproj.b"));
      for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
    }
    Vec h = RefLayerNorm(x, t_len, c, at("lnf.w"), at("lnf.b"));
    for (size_t t = 0; t < t_len; ++t) {
      Vec logits(cfg.vocab);
      double mx = -1e300;
      for (size_t v = 0; v < cfg.vocab; ++v) {
        double d = 0;
        for (size_t i = 0; i < c; ++i) d += h[t * c + i] * at("wte")[v * c + i];
        logits[v] = d;
        mx = std::max(mx, d);
      }
      double z = 0;
      for (double v : logits) z += std::exp(v - mx);
      loss += std::log(z) - (logits[seqs[b * s + t + 1]] - mx);
    }
  }
  return loss / static_cast<double>(n * t_len);
}

struct Tiny {
  CharTransformer model;
  std::vector<float> params;
  std::vector<uint8_t> seqs;
};

// A tiny model with parameters large enough that every nonlinearity matters.
Tiny MakeTiny() {
  const CharTransformerConfig cfg{/*vocab=*/11, /*context=*/5, /*layers=*/2, /*channels=*/8,
                                  /*heads=*/2};
  auto m = CharTransformer::Create(cfg);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  Tiny tiny{std::move(m).value(), {}, {}};
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 0.4);
  tiny.params.resize(tiny.model.num_parameters());
  for (float& v : tiny.params) v = static_cast<float>(normal(rng));
  for (const TensorInfo& t : tiny.model.tensors()) {
    if (t.name.find(".w") != std::string::npos && t.rows == 1) {  // LayerNorm gains near 1
      for (size_t i = 0; i < t.size; ++i) tiny.params[t.offset + i] += 1.0f;
    }
  }
  for (size_t i = 0; i < 3 * tiny.model.sequence_length(); ++i) {
    tiny.seqs.push_back(static_cast<uint8_t>(rng() % cfg.vocab));
  }
  return tiny;
}

TEST(CharTransformer, LossMatchesDoubleReference) {
  Tiny tiny = MakeTiny();
  std::vector<float> grads;
  auto loss = tiny.model.LossAndGradient(tiny.params, tiny.seqs, &grads);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  const Vec p(tiny.params.begin(), tiny.params.end());
  const double ref = RefLoss(tiny.model, p, tiny.seqs);
  EXPECT_NEAR(*loss, ref, 1e-5 * std::abs(ref));
  auto eval = tiny.model.Evaluate(tiny.params, tiny.seqs, /*chunk=*/2);
  ASSERT_TRUE(eval.ok());
  EXPECT_NEAR(eval->loss, ref, 1e-5 * std::abs(ref));
}

TEST(CharTransformer, GradientMatchesCentralDifferencesOfDoubleReference) {
  Tiny tiny = MakeTiny();
  std::vector<float> grads;
  ASSERT_TRUE(tiny.model.LossAndGradient(tiny.params, tiny.seqs, &grads).ok());
  Vec p(tiny.params.begin(), tiny.params.end());
  const double h = 1e-5;
  Vec numeric(p.size());
  double scale = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double keep = p[i];
    p[i] = keep + h;
    const double up = RefLoss(tiny.model, p, tiny.seqs);
    p[i] = keep - h;
    const double down = RefLoss(tiny.model, p, tiny.seqs);
    p[i] = keep;
    numeric[i] = (up - down) / (2 * h);
    scale = std::max(scale, std::abs(numeric[i]));
  }
  ASSERT_GT(scale, 1e-3);
  size_t bad = 0;
  for (const TensorInfo& t : tiny.model.tensors()) {
    double worst = 0, norm = 0;
    for (size_t i = t.offset; i < t.offset + t.size; ++i) {
      worst = std::max(worst, std::abs(grads[i] - numeric[i]));
      norm = std::max(norm, std::abs(numeric[i]));
    }
    // fp32 analytic vs double numeric: agreement to ~1e-4 of the largest gradient.
    if (worst > 1e-4 * scale + 1e-3 * norm) {
      ++bad;
      ADD_FAILURE() << t.name << ": max |analytic − numeric| = " << worst
                    << " (largest |numeric| in tensor " << norm << ")";
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(CharTransformer, InitialLossIsNearUniformAndInitIsDeterministic) {
  auto m = CharTransformer::Create({});
  ASSERT_TRUE(m.ok());
  const std::vector<float> a = m->InitialParameters(3), b = m->InitialParameters(3);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, m->InitialParameters(4));
  std::vector<uint8_t> seqs;
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < 2 * m->sequence_length(); ++i) seqs.push_back(rng() % 256);
  std::vector<float> grads;
  auto loss = m->LossAndGradient(a, seqs, &grads);
  ASSERT_TRUE(loss.ok());
  // Small init: nearly uniform predictions, loss ≈ ln(256).
  EXPECT_NEAR(*loss, std::log(256.0), 0.05);
}

TEST(CharTransformer, RejectsBadConfigAndBatches) {
  EXPECT_FALSE(CharTransformer::Create({256, 64, 2, 130, 4}).ok());  // 130 % 4 != 0
  EXPECT_FALSE(CharTransformer::Create({300, 64, 2, 128, 4}).ok());  // vocab > 256
  EXPECT_FALSE(CharTransformer::Create({256, 0, 2, 128, 4}).ok());
  Tiny tiny = MakeTiny();
  std::vector<float> grads;
  std::vector<uint8_t> ragged(tiny.seqs.begin(), tiny.seqs.end() - 1);
  EXPECT_FALSE(tiny.model.LossAndGradient(tiny.params, ragged, &grads).ok());
  std::vector<uint8_t> oov = tiny.seqs;
  oov[2] = 11;
  EXPECT_FALSE(tiny.model.LossAndGradient(tiny.params, oov, &grads).ok());
  std::vector<float> short_params(tiny.params.begin() + 1, tiny.params.end());
  EXPECT_FALSE(tiny.model.LossAndGradient(short_params, tiny.seqs, &grads).ok());
}

TEST(TextCorpus, SplitsEveryTenthEntryIntoValidation) {
  std::string text, want_train, want_val;
  for (int i = 0; i < 25; ++i) {
    const std::string entry = "entry " + std::to_string(i) + "\nsecond line\n";
    text += entry + "%\n";
    (i % 10 == 9 ? want_val : want_train) += entry + "%\n";
  }
  auto c = TextCorpus::FromText(text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train(), want_train);
  EXPECT_EQ(c->validation(), want_val);
  EXPECT_FALSE(TextCorpus::FromText("only one entry\n").ok());
  EXPECT_FALSE(TextCorpus::FromText(text, 1).ok());
}

TEST(TextCorpus, WindowsOverlapByOneByte) {
  const std::string text = "abcdefghij";  // 10 bytes, context 3: windows at 0, 3, 6
  EXPECT_EQ(TextCorpus::NumWindows(text, 3), 3u);
  EXPECT_EQ(TextCorpus::NumWindows(text, 10), 0u);
  std::vector<uint8_t> w;
  TextCorpus::AppendWindow(text, 3, 2, &w);
  EXPECT_EQ(std::string(w.begin(), w.end()), "ghij");
}

TEST(TextCorpus, MissingFolderNamesThePackage) {
  auto c = TextCorpus::Load("/nonexistent/fortunes");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("fortunes"), std::string::npos);
}

}  // namespace
}  // namespace loco
