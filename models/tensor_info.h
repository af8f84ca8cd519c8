// TensorInfo: where one named tensor of a model lies in the flat parameter
// vector (DESIGN §3), and its shape. The built-in models list theirs in
// order (tensors()); the tensors are contiguous and cover the vector.
#pragma once

#include <cstddef>
#include <string>

namespace loco {

struct TensorInfo {
  std::string name;  // "w0", "b0", ...
  size_t offset = 0;
  size_t size = 0;
  size_t rows = 0;   // out features (1 row for a bias)
  size_t cols = 0;   // in features (size for a bias)
};

}  // namespace loco
