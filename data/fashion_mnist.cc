#include "data/fashion_mnist.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace loco {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
// Generous upper bounds that reject absurd headers before allocating.
constexpr uint32_t kMaxItems = 10'000'000;
constexpr uint32_t kMaxSide = 4096;

std::string MissingMessage(const std::string& path) {
  return "cannot open " + path +
         ": the Fashion-MNIST files are missing; install Debian's package "
         "(apt-get install dataset-fashion-mnist, or scripts/install-deps.sh) or point "
         "--data-dir at a folder holding the four *-ubyte.gz files";
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

class GzReader {
 public:
  explicit GzReader(std::string path) : path_(std::move(path)) {}

  Status Open() {
    struct stat st{};
    if (::stat(path_.c_str(), &st) != 0) return NotFound(MissingMessage(path_));
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_) return NotFound(MissingMessage(path_));
    return Status::Ok();
  }

  // Reads exactly n bytes; DATA_LOSS on a short or corrupt stream.
  Status Read(void* dst, size_t n) {
    auto* p = static_cast<unsigned char*>(dst);
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      const int got = gzread(file_.get(), p, chunk);
      if (got < 0) {
        int err = 0;
        const char* msg = gzerror(file_.get(), &err);
        return DataLoss(path_ + ": corrupt gzip stream (" + (msg ? msg : "unknown") + ")");
      }
      if (got == 0) {
        return DataLoss(path_ + ": file ends early; it is truncated (reinstall "
                        "dataset-fashion-mnist)");
      }
      p += got;
      n -= static_cast<size_t>(got);
    }
    return Status::Ok();
  }

  Status ReadU32(uint32_t* v) {
    unsigned char b[4];
    LOCO_RETURN_IF_ERROR(Read(b, 4));
    *v = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
    return Status::Ok();
  }

  // DATA_LOSS when bytes remain after the payload (a wrong or mixed-up file).
  Status ExpectEnd() {
    unsigned char extra;
    const int got = gzread(file_.get(), &extra, 1);
    if (got != 0) {
      return DataLoss(path_ + ": unexpected data after the declared items (or a corrupt "
                      "stream); the header does not match the file");
    }
    return Status::Ok();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  GzFile file_;
};

Status CheckMagic(const GzReader& r, uint32_t got, uint32_t want) {
  if (got == want) return Status::Ok();
  char buf[96];
  std::snprintf(buf, sizeof(buf), ": magic number 0x%08x, expected 0x%08x", got, want);
  return DataLoss(r.path() + buf + " (not an IDX " + (want == kImageMagic ? "image" : "label") +
                  " file)");
}

}  // namespace

Status FashionMnist::ReadImages(const std::string& path, ImageSet* out) {
  GzReader r(path);
  LOCO_RETURN_IF_ERROR(r.Open());
  uint32_t magic = 0, count = 0, rows = 0, cols = 0;
  LOCO_RETURN_IF_ERROR(r.ReadU32(&magic));
  LOCO_RETURN_IF_ERROR(CheckMagic(r, magic, kImageMagic));
  LOCO_RETURN_IF_ERROR(r.ReadU32(&count));
  LOCO_RETURN_IF_ERROR(r.ReadU32(&rows));
  LOCO_RETURN_IF_ERROR(r.ReadU32(&cols));
  if (count == 0 || count > kMaxItems || rows == 0 || rows > kMaxSide || cols == 0 ||
      cols > kMaxSide) {
    return DataLoss(path + ": implausible header (" + std::to_string(count) + " images of " +
                    std::to_string(rows) + "x" + std::to_string(cols) + ")");
  }
  const size_t pixels = size_t{rows} * cols, total = pixels * count;
  std::vector<unsigned char> raw(total);
  LOCO_RETURN_IF_ERROR(r.Read(raw.data(), total));
  LOCO_RETURN_IF_ERROR(r.ExpectEnd());
  out->rows = rows;
  out->cols = cols;
  out->images.resize(total);
  for (size_t i = 0; i < total; ++i) {
    out->images[i] = (static_cast<float>(raw[i]) / 255.0f - kMean) / kStd;
  }
  return Status::Ok();
}

Status FashionMnist::ReadLabels(const std::string& path, ImageSet* out) {
  GzReader r(path);
  LOCO_RETURN_IF_ERROR(r.Open());
  uint32_t magic = 0, count = 0;
  LOCO_RETURN_IF_ERROR(r.ReadU32(&magic));
  LOCO_RETURN_IF_ERROR(CheckMagic(r, magic, kLabelMagic));
  LOCO_RETURN_IF_ERROR(r.ReadU32(&count));
  if (count == 0 || count > kMaxItems) {
    return DataLoss(path + ": implausible label count " + std::to_string(count));
  }
  out->labels.resize(count);
  LOCO_RETURN_IF_ERROR(r.Read(out->labels.data(), count));
  LOCO_RETURN_IF_ERROR(r.ExpectEnd());
  for (size_t i = 0; i < count; ++i) {
    if (out->labels[i] >= kClasses) {
      return DataLoss(path + ": label " + std::to_string(out->labels[i]) + " at index " +
                      std::to_string(i) + " is outside [0, 10)");
    }
  }
  return Status::Ok();
}

StatusOr<FashionMnist> FashionMnist::Load(const std::string& dir) {
  FashionMnist d;
  struct Split {
    const char* images;
    const char* labels;
    ImageSet* set;
  };
  const Split splits[] = {
      {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", &d.train_},
      {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", &d.test_},
  };
  for (const Split& s : splits) {
    LOCO_RETURN_IF_ERROR(ReadImages(dir + "/" + s.images, s.set));
    LOCO_RETURN_IF_ERROR(ReadLabels(dir + "/" + s.labels, s.set));
    if (s.set->images.size() != s.set->labels.size() * s.set->pixels()) {
      return DataLoss(dir + ": " + s.images + " holds " +
                      std::to_string(s.set->images.size() / s.set->pixels()) + " images but " +
                      s.labels + " holds " + std::to_string(s.set->labels.size()) + " labels");
    }
  }
  return d;
}

}  // namespace loco
