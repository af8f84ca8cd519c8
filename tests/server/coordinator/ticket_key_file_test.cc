// server/coordinator/ticket_key_file.h: keys are private (0600), 64 hex digits the
// coordinator's loader accepts as they are; WriteTicketKeyIfMissing never
// replaces a file.
#include "server/coordinator/ticket_key_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "security/worker_ticket.h"

namespace loco {
namespace {

std::string Contents(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// A private file of 64 hex digits (32 random bytes; no trailing newline for
// the loader to drop), which the coordinator's loader takes.
void ExpectAKey(const std::string& path) {
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string key = Contents(path);
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
  EXPECT_TRUE(WorkerTicketKey::FromFile(path).ok());
}

TEST(TicketKeyFile, WriteTicketKeyIfMissingWritesOnceAndThenKeepsIt) {
  const std::string dir = ::testing::TempDir() + "/state";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/ticket.key";
  auto created = WriteTicketKeyIfMissing(path);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(*created);
  ExpectAKey(path);
  const std::string key = Contents(path);
  auto again = WriteTicketKeyIfMissing(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(*again);
  EXPECT_EQ(Contents(path), key) << "a later start keeps the key";
  // Only the key is left: the draft it was written as is gone.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);

  // What is there is left alone, even when it is no key: the coordinator's
  // loader then says what is wrong with it.
  const std::string short_key = dir + "/short.key";
  std::ofstream(short_key) << "abc\n";
  auto kept = WriteTicketKeyIfMissing(short_key);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(*kept);
  EXPECT_EQ(Contents(short_key), "abc\n");

  const auto missing_dir = WriteTicketKeyIfMissing("/nonexistent-dir/ticket.key");
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.status().message().find("/nonexistent-dir/ticket.key"), std::string::npos)
      << missing_dir.status().ToString();
}

}  // namespace
}  // namespace loco
