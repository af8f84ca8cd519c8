// FloatArray: a numpy array checked to be what loco::Worker reads or writes
// in place — 1-D, float32 in native byte order, C-contiguous, aligned, and
// writeable when the worker writes it — seen as a std::span without a copy.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include <pybind11/pybind11.h>

namespace loco::python {

enum class ArrayAccess { kRead, kWrite };

// Holds the array's buffer exported (a Py_buffer) for as long as it lives,
// so that the memory can neither move nor be freed while the GIL is
// released. Create and destroy with the GIL held; the span may be used
// without it.
class FloatArray {
 public:
  // Checks `object` before anything is sent: TypeError when it is not a
  // numpy.ndarray of float32; ValueError when it is not 1-D, not
  // C-contiguous, not aligned, read-only although `access` is kWrite, or of
  // another size than `expected_size` (when given). Every message starts
  // with `name`, the argument's name.
  static FloatArray From(pybind11::handle object, const char* name, ArrayAccess access,
                         std::optional<size_t> expected_size);

  FloatArray(FloatArray&&) = default;
  FloatArray& operator=(FloatArray&&) = default;

  std::span<const float> values() const { return {data_, size_}; }
  // Only for an array taken with ArrayAccess::kWrite.
  std::span<float> mutable_values() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  FloatArray(pybind11::buffer_info info, float* data, size_t size)
      : info_(std::move(info)), data_(data), size_(size) {}

  pybind11::buffer_info info_;  // keeps the buffer exported
  float* data_ = nullptr;
  size_t size_ = 0;
};

// Whether two arrays share any memory (a step must not read its gradient
// from the parameters it writes).
bool Overlap(std::span<const float> a, std::span<const float> b);

}  // namespace loco::python
