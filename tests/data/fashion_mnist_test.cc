#include "data/fashion_mnist.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace loco {
namespace {

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/loco_fmnist_XXXXXX";
  char* made = mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr);
  return tmpl;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

std::string BigEndian(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
}

TEST(FashionMnistTest, LoadsDebianFiles) {
  auto d = FashionMnist::Load();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->train().size(), 60000u);
  EXPECT_EQ(d->test().size(), 10000u);
  EXPECT_EQ(d->train().rows, 28u);
  EXPECT_EQ(d->train().cols, 28u);
  EXPECT_EQ(d->train().images.size(), 60000u * 784);
  EXPECT_EQ(d->test().images.size(), 10000u * 784);
  // Fashion-MNIST is balanced: 6000 train and 1000 test images per class.
  std::array<size_t, 10> train_count{}, test_count{};
  for (uint8_t y : d->train().labels) {
    ASSERT_LT(y, 10);
    ++train_count[y];
  }
  for (uint8_t y : d->test().labels) {
    ASSERT_LT(y, 10);
    ++test_count[y];
  }
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_count[c], 6000u) << c;
    EXPECT_EQ(test_count[c], 1000u) << c;
  }
  // Normalised with the training set's own mean and std: ~0 and ~1.
  double sum = 0, sq = 0;
  for (float v : d->train().images) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(d->train().images.size());
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 1.0, 0.02);
  // Pixel 0 scaled to [0,1] then normalised: (0 - 0.2860) / 0.3530.
  const float lo = *std::min_element(d->train().images.begin(), d->train().images.end());
  EXPECT_FLOAT_EQ(lo, (0.0f - 0.2860f) / 0.3530f);
}

TEST(FashionMnistTest, MissingDirectoryNamesThePackage) {
  auto d = FashionMnist::Load("/nonexistent/loco/fashion-mnist");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("dataset-fashion-mnist"), std::string::npos)
      << d.status().message();
}

TEST(FashionMnistTest, RejectsCorruptTruncatedAndMislabelledFiles) {
  const std::string dir = MakeTempDir();
  ImageSet set;

  // Not gzip at all: zlib reads such a file transparently, so the magic fails.
  WriteFile(dir + "/garbage.gz", std::string(64, '\x5a'));
  EXPECT_EQ(FashionMnist::ReadImages(dir + "/garbage.gz", &set).code(), StatusCode::kDataLoss);

  // A real file cut short in the middle of the compressed stream.
  const std::string real =
      ReadFile(std::string(FashionMnist::kDefaultDir) + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_GT(real.size(), 2000u);
  WriteFile(dir + "/short.gz", real.substr(0, 2000));
  EXPECT_EQ(FashionMnist::ReadLabels(dir + "/short.gz", &set).code(), StatusCode::kDataLoss);

  // Corrupted bytes inside the deflate stream.
  std::string flipped = real;
  for (size_t i = 100; i < 400; ++i) flipped[i] = static_cast<char>(flipped[i] ^ 0xA5);
  WriteFile(dir + "/flipped.gz", flipped);
  EXPECT_FALSE(FashionMnist::ReadLabels(dir + "/flipped.gz", &set).ok());

  // A label file offered as images: wrong magic number.
  WriteGzip(dir + "/labels.gz", BigEndian(0x801) + BigEndian(3) + std::string("\1\2\3"));
  Status s = FashionMnist::ReadImages(dir + "/labels.gz", &set);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.message();
  // The same file is a valid label file.
  EXPECT_TRUE(FashionMnist::ReadLabels(dir + "/labels.gz", &set).ok());
  EXPECT_EQ(set.labels, (std::vector<uint8_t>{1, 2, 3}));

  // Header promises more labels than the file holds; a label outside 0..9.
  WriteGzip(dir + "/few.gz", BigEndian(0x801) + BigEndian(5) + std::string("\1\2\3"));
  EXPECT_EQ(FashionMnist::ReadLabels(dir + "/few.gz", &set).code(), StatusCode::kDataLoss);
  WriteGzip(dir + "/range.gz", BigEndian(0x801) + BigEndian(2) + std::string("\1\x0b"));
  EXPECT_EQ(FashionMnist::ReadLabels(dir + "/range.gz", &set).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace loco
