// The test main (tests/main/test_main.cc) gives each run a private
// temporary directory: ::testing::TempDir() must point into it, not at the
// shared /tmp, so that what the tests write goes away with the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

TEST(TestTempDir, IsAFreshDirectoryOfThisRunOnly) {
  const std::string dir = ::testing::TempDir();
  ASSERT_NE(dir, "/tmp/");
  EXPECT_NE(dir.find("/loco-test."), std::string::npos) << dir;
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
  // Writable, as the tests that put logs there expect.
  const std::string file = dir + "/probe.txt";
  { std::ofstream(file) << "x"; }
  EXPECT_TRUE(std::filesystem::exists(file));
  std::filesystem::remove(file);
}

}  // namespace
