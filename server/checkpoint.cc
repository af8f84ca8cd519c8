#include "server/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/log.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'O', 'C', 'O', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFormat = 2;
constexpr uint32_t kOldestFormat = 1;
// magic + format + shard_id + offset + length + version + replica_length
// (+ total_elements from format 2 on)
constexpr size_t HeaderBytes(uint32_t format) {
  return 8 + 4 + 4 + 8 + 8 + 8 + 8 + (format >= 2 ? 8 : 0);
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

template <typename T>
void Put(std::string* out, T x) {
  out->append(reinterpret_cast<const char*>(&x), sizeof(x));
}

void PutFloats(std::string* out, const std::vector<float>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

template <typename T>
T Get(std::string_view in, size_t* pos) {
  T x;
  std::memcpy(&x, in.data() + *pos, sizeof(x));
  *pos += sizeof(x);
  return x;
}

std::vector<float> GetFloats(std::string_view in, size_t* pos, uint64_t n) {
  std::vector<float> v(n);
  if (n > 0) std::memcpy(v.data(), in.data() + *pos, n * sizeof(float));  // data() may be null
  *pos += n * sizeof(float);
  return v;
}

uint32_t Crc32(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large buffers in pieces.
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Internal(Errno("cannot write", path));
    }
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Internal(Errno("cannot open folder", dir));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Internal(Errno("cannot fsync folder", dir));
  return Status::Ok();
}

// "shard-<id>-v" prefix of a shard's final files.
std::string Prefix(uint32_t shard_id) { return "shard-" + std::to_string(shard_id) + "-v"; }

}  // namespace

Status Checkpointer::ValidateOptions(const CheckpointOptions& o) {
  if (o.keep == 0) {
    return InvalidArgument("checkpoint keep must be >= 1 (the newest checkpoint is always kept)");
  }
  return Status::Ok();
}

std::string Checkpointer::FileName(uint32_t shard_id, uint64_t version) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%020llu", static_cast<unsigned long long>(version));
  return Prefix(shard_id) + digits + ".ckpt";
}

Status Checkpointer::Prepare() const {
  if (options_.dir.empty()) return FailedPrecondition("checkpoint folder is empty");
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec || !fs::is_directory(options_.dir)) {
    return FailedPrecondition("cannot create the checkpoint folder " + options_.dir + ": " +
                              (ec ? ec.message() : "not a folder") +
                              "; pass a writable --checkpoint-dir");
  }
  if (::access(options_.dir.c_str(), W_OK) != 0) {
    return FailedPrecondition(Errno("the checkpoint folder is not writable:", options_.dir) +
                              "; pass a writable --checkpoint-dir");
  }
  return Status::Ok();
}

StatusOr<std::string> Checkpointer::Serialize(const ShardCheckpoint& c) {
  const uint64_t n = c.range.length;
  if (c.params.size() != n || c.m.size() != n || c.v.size() != n ||
      (!c.replica.empty() && c.replica.size() != n)) {
    return InvalidArgument("checkpoint of shard " + std::to_string(c.shard_id) +
                           ": params/m/v/replica sizes differ from the range length " +
                           std::to_string(n));
  }
  if (c.total_elements != 0 && c.range.offset + n > c.total_elements) {
    return InvalidArgument("checkpoint of shard " + std::to_string(c.shard_id) +
                           ": the range ends past the model of " +
                           std::to_string(c.total_elements) + " elements");
  }
  std::string bytes;
  bytes.reserve(HeaderBytes(kFormat) + (3 + c.replica.size() / std::max<uint64_t>(n, 1)) * n * 4 +
                4);
  bytes.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&bytes, kFormat);
  Put<uint32_t>(&bytes, c.shard_id);
  Put<uint64_t>(&bytes, c.range.offset);
  Put<uint64_t>(&bytes, c.range.length);
  Put<uint64_t>(&bytes, c.version);
  Put<uint64_t>(&bytes, c.replica.size());
  Put<uint64_t>(&bytes, c.total_elements);
  PutFloats(&bytes, c.params);
  PutFloats(&bytes, c.m);
  PutFloats(&bytes, c.v);
  PutFloats(&bytes, c.replica);
  Put<uint32_t>(&bytes, Crc32(bytes.data(), bytes.size()));
  return bytes;
}

StatusOr<std::string> Checkpointer::Write(const ShardCheckpoint& c) const {
  StatusOr<std::string> serialized = Serialize(c);
  if (!serialized.ok()) return serialized.status();
  const std::string& bytes = *serialized;
  const std::string final_path = (fs::path(options_.dir) / FileName(c.shard_id, c.version)).string();
  const std::string tmp_path = (fs::path(options_.dir) / ("." + FileName(c.shard_id, c.version) +
                                                          "." + std::to_string(::getpid()) + ".tmp"))
                                   .string();
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal(Errno("cannot create", tmp_path));
  Status s = WriteAll(fd, bytes, tmp_path);
  if (s.ok() && ::fsync(fd) != 0) s = Internal(Errno("cannot fsync", tmp_path));
  if (::close(fd) != 0 && s.ok()) s = Internal(Errno("cannot close", tmp_path));
  if (s.ok() && std::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    s = Internal(Errno("cannot rename onto", final_path));
  }
  if (!s.ok()) {
    ::unlink(tmp_path.c_str());
    return s;
  }
  LOCO_RETURN_IF_ERROR(FsyncDir(options_.dir));
  Prune(c.shard_id);
  return final_path;
}

std::vector<std::string> Checkpointer::List(uint32_t shard_id) const {
  std::vector<std::string> paths;
  std::error_code ec;
  const std::string prefix = Prefix(shard_id);
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = e.path().filename().string();
    // The fixed-width version keeps "shard-1-v" from matching shard 12's files.
    if (name.size() == prefix.size() + 20 + 5 && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - 5, 5, ".ckpt") == 0) {
      paths.push_back(e.path().string());
    }
  }
  std::sort(paths.rbegin(), paths.rend());  // zero-padded versions: newest first
  return paths;
}

void Checkpointer::Prune(uint32_t shard_id) const {
  const std::vector<std::string> paths = List(shard_id);
  for (size_t i = options_.keep; i < paths.size(); ++i) {
    if (::unlink(paths[i].c_str()) != 0) {
      LOG_WARN(Errno("cannot delete old checkpoint", paths[i]));
    }
  }
}

StatusOr<ShardCheckpoint> Checkpointer::ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return DataLoss(Errno("cannot open", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Parse(bytes);
}

StatusOr<ShardCheckpoint> Checkpointer::Parse(std::string_view bytes) {
  if (bytes.size() < HeaderBytes(kOldestFormat) + 4) {
    return DataLoss("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than a header");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return DataLoss("not a LoCo-PS checkpoint (bad magic)");
  }
  size_t pos = sizeof(kMagic);
  const uint32_t format = Get<uint32_t>(bytes, &pos);
  if (format < kOldestFormat || format > kFormat) {
    return DataLoss("format " + std::to_string(format) + ", this build reads " +
                    std::to_string(kOldestFormat) + " to " + std::to_string(kFormat));
  }
  if (bytes.size() < HeaderBytes(format) + 4) {
    return DataLoss("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than a header");
  }
  ShardCheckpoint c;
  c.shard_id = Get<uint32_t>(bytes, &pos);
  c.range.offset = Get<uint64_t>(bytes, &pos);
  c.range.length = Get<uint64_t>(bytes, &pos);
  c.version = Get<uint64_t>(bytes, &pos);
  const uint64_t replica = Get<uint64_t>(bytes, &pos);
  if (format >= 2) c.total_elements = Get<uint64_t>(bytes, &pos);
  const uint64_t n = c.range.length;
  const uint64_t max = uint64_t{1} << 40;
  if (n > max || c.range.offset > max || (replica != 0 && replica != n) ||
      (c.total_elements != 0 && c.range.offset + n > c.total_elements)) {
    return DataLoss("implausible header (offset " + std::to_string(c.range.offset) + ", length " +
                    std::to_string(n) + ", replica " + std::to_string(replica) + ", model " +
                    std::to_string(c.total_elements) + ")");
  }
  const uint64_t expect = HeaderBytes(format) + (3 * n + replica) * sizeof(float) + 4;
  if (bytes.size() != expect) {
    return DataLoss((bytes.size() < expect ? "truncated: " : "oversized: ") +
                    std::to_string(bytes.size()) + " bytes, expected " + std::to_string(expect));
  }
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  if (stored != Crc32(bytes.data(), bytes.size() - 4)) return DataLoss("checksum mismatch");
  c.params = GetFloats(bytes, &pos, n);
  c.m = GetFloats(bytes, &pos, n);
  c.v = GetFloats(bytes, &pos, n);
  c.replica = GetFloats(bytes, &pos, replica);
  return c;
}

std::optional<ShardCheckpoint> Checkpointer::LoadNewest(uint32_t shard_id,
                                                       std::string* loaded_path,
                                                       std::vector<std::string>* skipped) const {
  std::error_code ec;
  if (!fs::exists(options_.dir, ec)) return std::nullopt;
  // A temporary file is what a crash during Write leaves behind: never valid.
  const std::string tmp_prefix = "." + Prefix(shard_id);
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(tmp_prefix, 0) == 0 && name.size() > 4 &&
        name.compare(name.size() - 4, 4, ".tmp") == 0) {
      LOG_WARN("removing unfinished checkpoint " << e.path().string());
      std::error_code rm;
      fs::remove(e.path(), rm);
    }
  }
  for (const std::string& path : List(shard_id)) {
    auto c = ReadFile(path);
    std::string why;
    if (!c.ok()) {
      why = c.status().message();
    } else if (c->shard_id != shard_id) {
      why = "holds shard " + std::to_string(c->shard_id) + ", not " + std::to_string(shard_id);
    } else {
      if (loaded_path != nullptr) *loaded_path = path;
      return std::move(c).value();
    }
    LOG_WARN("skipping checkpoint " << path << ": " << why);
    if (skipped != nullptr) skipped->push_back(path + ": " + why);
  }
  return std::nullopt;
}

}  // namespace loco
