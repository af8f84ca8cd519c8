#include "plan/measured_runs.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace loco::plan {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// One row's fields by column name, with messages that name the line.
class Row {
 public:
  Row(const std::map<std::string, size_t>& columns, std::vector<std::string> fields,
      size_t line)
      : columns_(columns), fields_(std::move(fields)), line_(line) {}

  bool Has(const std::string& column) const { return columns_.count(column) > 0; }

  StatusOr<std::string> Text(const std::string& column) const {
    auto it = columns_.find(column);
    if (it == columns_.end()) return InvalidArgument("no column '" + column + "'");
    if (it->second >= fields_.size()) return Bad(column, "", "is missing");
    return fields_[it->second];
  }

  // A finite number >= min; an empty field is `empty_value` when allowed.
  StatusOr<double> Number(const std::string& column, double min, bool allow_empty = false,
                          double empty_value = 0) const {
    StatusOr<std::string> text = Text(column);
    if (!text.ok()) return text.status();
    if (text->empty() && allow_empty) return empty_value;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text->c_str(), &end);
    if (text->empty() || end != text->c_str() + text->size() || errno == ERANGE ||
        !std::isfinite(v) || v < min) {
      return Bad(column, *text, "is not a number >= " + std::to_string(min));
    }
    return v;
  }

  Status Bad(const std::string& column, const std::string& value, const std::string& why) const {
    return InvalidArgument("line " + std::to_string(line_) + ", column " + column + ": '" +
                           value + "' " + why);
  }

 private:
  const std::map<std::string, size_t>& columns_;
  std::vector<std::string> fields_;
  size_t line_;
};

#define LOCO_ASSIGN_NUMBER(lhs, expr)        \
  do {                                       \
    StatusOr<double> loco_number_ = (expr);  \
    if (!loco_number_.ok()) return loco_number_.status(); \
    lhs = *loco_number_;                     \
  } while (0)

Status ParseEncoding(const Row& row, const std::string& codec_column,
                     const std::string& quantised_name, const std::string& bits_column,
                     const std::string& block_column, WireEncoding* out) {
  StatusOr<std::string> codec = row.Text(codec_column);
  if (!codec.ok()) return codec.status();
  if (*codec == "fp32") {
    out->codec = WireCodec::kFp32;
  } else if (*codec == "bf16") {
    out->codec = WireCodec::kBf16;
  } else if (*codec == quantised_name) {
    out->codec = WireCodec::kBlockQuant;
    double bits = 0, block = 0;
    LOCO_ASSIGN_NUMBER(bits, row.Number(bits_column, 2));
    LOCO_ASSIGN_NUMBER(block, row.Number(block_column, 32));
    out->bits = static_cast<int>(bits);
    out->block_size = static_cast<int>(block);
  } else {
    return row.Bad(codec_column, *codec, "is not fp32, bf16 or " + quantised_name);
  }
  return Status::Ok();
}

StatusOr<MeasuredRun> ParseRow(const Row& row) {
  MeasuredRun run;
  StatusOr<std::string> label = row.Text("label");
  if (!label.ok()) return label.status();
  run.label = *label;
  double params = 0, workers = 0, servers = 0, batch = 0, link_mbit = 0, cores = 0, rss_mb = 0;
  LOCO_ASSIGN_NUMBER(params, row.Number("params", 1));
  LOCO_ASSIGN_NUMBER(workers, row.Number("workers", 1));
  LOCO_ASSIGN_NUMBER(servers, row.Number("servers", 1));
  LOCO_ASSIGN_NUMBER(batch, row.Number("batch_per_worker", 1));
  LOCO_ASSIGN_NUMBER(link_mbit, row.Number("link_mbit", 1));
  LOCO_ASSIGN_NUMBER(cores, row.Number("host_cores", 1));
  LOCO_ASSIGN_NUMBER(run.step_s, row.Number("step_s", 1e-9));
  LOCO_ASSIGN_NUMBER(rss_mb, row.Number("server_rss_mb", 0, true, 0));
  run.server_rss_bytes = rss_mb * 1024 * 1024;
  if (row.Has("server_cpu_s")) {
    LOCO_ASSIGN_NUMBER(run.server_cpu_s, row.Number("server_cpu_s", 0, true, 0));
  }
  ClusterSpec& s = run.spec;
  s.params = static_cast<uint64_t>(params);
  s.workers = static_cast<uint32_t>(workers);
  s.shards = static_cast<uint32_t>(servers);
  s.batch_per_gpu = static_cast<uint32_t>(batch);
  s.worker_link_gbps = link_mbit / 1000;
  s.server_link_gbps = link_mbit / 1000 * workers / servers;
  s.shared_cores = static_cast<uint32_t>(cores);
  s.gpus_per_node = 1;
  LOCO_RETURN_IF_ERROR(ParseEncoding(row, "codec", "loco", "bits", "block", &s.push));
  LOCO_RETURN_IF_ERROR(
      ParseEncoding(row, "pull_codec", "delta", "pull_bits", "pull_block", &s.pull));
  Status valid = ValidateClusterSpec(s);
  if (!valid.ok()) return row.Bad("label", run.label, "is not a valid cluster: " + valid.message());
  return run;
}

#undef LOCO_ASSIGN_NUMBER

}  // namespace

StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(const std::string& csv_text) {
  std::istringstream in(csv_text);
  std::string line;
  std::map<std::string, size_t> columns;
  std::vector<MeasuredRun> runs;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = SplitCsvLine(line);
    if (columns.empty()) {
      for (size_t k = 0; k < fields.size(); ++k) columns[fields[k]] = k;
      continue;
    }
    StatusOr<MeasuredRun> run = ParseRow(Row(columns, std::move(fields), number));
    if (!run.ok()) return run.status();
    runs.push_back(*run);
  }
  if (runs.empty()) return InvalidArgument("no measured runs (a header line and >= 1 row)");
  return runs;
}

StatusOr<std::vector<MeasuredRun>> ReadMeasuredRuns(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open measured runs '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<std::vector<MeasuredRun>> runs = ParseMeasuredRuns(text.str());
  if (!runs.ok()) return runs.status().Annotate(path);
  return runs;
}

}  // namespace loco::plan
