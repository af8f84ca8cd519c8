#include "data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace loco {

StatusOr<TextCorpus> TextCorpus::FromText(const std::string& text, size_t validation_every) {
  if (validation_every < 2) {
    return InvalidArgument("TextCorpus: validation_every " + std::to_string(validation_every) +
                           " must be >= 2 (one entry in N goes to validation)");
  }
  TextCorpus corpus;
  std::istringstream in(text);
  std::string line, entry;
  size_t index = 0;
  auto flush = [&] {
    if (entry.empty()) return;
    std::string& dst =
        index % validation_every == validation_every - 1 ? corpus.validation_ : corpus.train_;
    dst += entry;
    dst += "%\n";
    entry.clear();
    ++index;
  };
  while (std::getline(in, line)) {
    if (line == "%") {
      flush();
    } else {
      entry += line;
      entry += '\n';
    }
  }
  flush();
  if (corpus.train_.empty() || corpus.validation_.empty()) {
    return InvalidArgument("TextCorpus: " + std::to_string(index) + " entries give an empty " +
                           (corpus.train_.empty() ? "training" : "validation") +
                           " split; expected at least " + std::to_string(validation_every) +
                           " entries separated by lines holding only '%'");
  }
  return corpus;
}

StatusOr<TextCorpus> TextCorpus::Load(const std::string& dir, size_t validation_every) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find('.') != std::string::npos || it->is_symlink(ec)) continue;
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (files.empty()) {
    return NotFound("TextCorpus: no text files in '" + dir +
                    "'; install Debian's package 'fortunes' or pass a folder of "
                    "'%'-separated text files");
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& p : files) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return NotFound("TextCorpus: cannot read '" + p.string() + "'");
    std::ostringstream buf;
    buf << f.rdbuf();
    text += buf.str();
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += "%\n";  // a file's last entry has no separator of its own
  }
  return FromText(text, validation_every);
}

size_t TextCorpus::NumWindows(const std::string& text, size_t context) {
  if (context == 0 || text.size() < context + 1) return 0;
  return (text.size() - 1) / context;
}

void TextCorpus::AppendWindow(const std::string& text, size_t context, size_t k,
                              std::vector<uint8_t>* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + k * context;
  out->insert(out->end(), p, p + context + 1);
}

}  // namespace loco
