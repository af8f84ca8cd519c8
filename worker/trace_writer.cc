#include "worker/trace_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace loco {
namespace {

StatusOr<std::unique_ptr<std::FILE, void (*)(std::FILE*)>> OpenAppend(const std::string& path,
                                                                      const char* header) {
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return Status(StatusCode::kUnavailable,
                  "TraceWriter: cannot open '" + path + "' for appending: " + std::strerror(errno));
  }
  if (fresh) std::fputs(header, f);
  return std::unique_ptr<std::FILE, void (*)(std::FILE*)>(f, [](std::FILE* p) { std::fclose(p); });
}

Status Flushed(std::FILE* f, int written) {
  if (written < 0 || std::fflush(f) != 0) {
    return Status(StatusCode::kUnavailable,
                  std::string("TraceWriter: write failed: ") + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TraceWriter> TraceWriter::Open(const std::string& dir, const std::string& name) {
  if (dir.empty() || name.empty() || name.find('/') != std::string::npos) {
    return InvalidArgument("TraceWriter: need a folder and a worker name without '/', got '" +
                           dir + "' and '" + name + "'");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status(StatusCode::kUnavailable,
                  "TraceWriter: cannot create '" + dir + "': " + ec.message());
  }
  auto steps = OpenAppend(dir + "/" + name + ".csv", "step,loss\n");
  if (!steps.ok()) return steps.status();
  auto evals = OpenAppend(dir + "/" + name + "-eval.csv", "step,epoch,accuracy,loss\n");
  if (!evals.ok()) return evals.status();
  return TraceWriter(File(steps->release()), File(evals->release()));
}

Status TraceWriter::Step(uint64_t step, double loss) {
  return Flushed(steps_.get(), std::fprintf(steps_.get(), "%llu,%.9g\n",
                                            static_cast<unsigned long long>(step), loss));
}

Status TraceWriter::Eval(uint64_t step, uint64_t epoch, double accuracy, double loss) {
  return Flushed(evals_.get(),
                 std::fprintf(evals_.get(), "%llu,%llu,%.9g,%.9g\n",
                              static_cast<unsigned long long>(step),
                              static_cast<unsigned long long>(epoch), accuracy, loss));
}

}  // namespace loco
