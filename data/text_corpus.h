// TextCorpus: a plain-text corpus for the character-level language model,
// read offline from Debian's `fortunes` package (/usr/share/games/fortunes:
// ~2.7 MB of English quotations, jokes and definitions in ~9800 entries).
//
// The corpus is the concatenation, in file-name order, of every regular file
// in the folder whose name has no '.' (the text files; the *.dat indexes and
// *.u8 links are skipped). Entries are separated by a line holding only '%'.
// The split is deterministic and by entry, so that the validation text is
// unseen but of the same kind: entry i (counted across files) goes to the
// validation text when i % validation_every == validation_every − 1, to the
// training text otherwise. Each entry keeps its text and is followed by
// "%\n", as in the files.
//
// Training and validation samples are windows of `context + 1` bytes
// starting at multiples of `context` (non-overlapping inputs), so a data
// epoch visits every training byte once as an input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

class TextCorpus {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/games/fortunes";

  // NOT_FOUND (naming the package) when `dir` has no text files;
  // INVALID_ARGUMENT when validation_every < 2 or either split ends up empty.
  static StatusOr<TextCorpus> Load(const std::string& dir = kDefaultDir,
                                   size_t validation_every = 10);
  // The same split applied to text already in memory (tests).
  static StatusOr<TextCorpus> FromText(const std::string& text, size_t validation_every = 10);

  const std::string& train() const { return train_; }
  const std::string& validation() const { return validation_; }

  // Number of windows of context + 1 bytes in `text` (0 when it is shorter).
  static size_t NumWindows(const std::string& text, size_t context);
  // Appends window k of `text` (bytes [k·context, k·context + context]) to
  // *out. Precondition: k < NumWindows(text, context).
  static void AppendWindow(const std::string& text, size_t context, size_t k,
                           std::vector<uint8_t>* out);

 private:
  std::string train_, validation_;
};

}  // namespace loco
