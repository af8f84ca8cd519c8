// FashionMnist: the Fashion-MNIST dataset (60000 train / 10000 test 28×28
// grey images, 10 classes) read from the four gzip'd IDX files installed by
// Debian's package dataset-fashion-mnist.
//
// Images are scaled to [0, 1] and then normalised with the training set's
// mean 0.2860 and standard deviation 0.3530, as float rows of 784 values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

// One split: images row-major (size() × pixels()), labels in [0, 10).
struct ImageSet {
  std::vector<float> images;
  std::vector<uint8_t> labels;
  size_t rows = 0, cols = 0;
  size_t size() const { return labels.size(); }
  size_t pixels() const { return rows * cols; }
};

class FashionMnist {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
  static constexpr float kMean = 0.2860f;
  static constexpr float kStd = 0.3530f;
  static constexpr size_t kClasses = 10;

  // Reads train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
  // t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from `dir`.
  // NOT_FOUND (naming the package to install) when a file is missing;
  // DATA_LOSS when a file is corrupt, truncated, has the wrong magic number,
  // or images and labels disagree in count.
  static StatusOr<FashionMnist> Load(const std::string& dir = kDefaultDir);

  const ImageSet& train() const { return train_; }
  const ImageSet& test() const { return test_; }

  // Reads one gzip'd IDX image file (magic 0x00000803) / label file
  // (0x00000801); exposed for tests.
  static Status ReadImages(const std::string& path, ImageSet* out);
  static Status ReadLabels(const std::string& path, ImageSet* out);

 private:
  ImageSet train_, test_;
};

}  // namespace loco
