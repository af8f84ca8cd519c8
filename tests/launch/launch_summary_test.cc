// --summary-json's file: whether it could be written is checked before a
// run starts, creating nothing; writing it at the end says why it failed.
#include "launch/launch_summary.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/says.h"

namespace loco {
namespace {

std::string Tmp(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name + "." + std::to_string(::getpid());
}

TEST(SummaryJsonPath, ANewFileInAnExistingFolderOrAFileThereIsTaken) {
  const std::string path = Tmp("summary-new.json");
  EXPECT_TRUE(CheckSummaryJsonPath(path).ok());
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the check made " << path;
  std::ofstream(path) << "{}\n";
  EXPECT_TRUE(CheckSummaryJsonPath(path).ok());
  ::unlink(path.c_str());
}

TEST(SummaryJsonPath, WhatCannotBeWrittenIsRefusedSayingWhy) {
  const std::string folder = Tmp("summary-dir");
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  EXPECT_TRUE(Says(CheckSummaryJsonPath(folder).message(), {"it is a folder"}));
  EXPECT_TRUE(Says(CheckSummaryJsonPath(Tmp("no-folder") + "/s.json").message(),
                   {"its folder " + Tmp("no-folder") + " does not exist"}));
  const std::string file = Tmp("summary-file");
  std::ofstream(file) << "x";
  EXPECT_TRUE(Says(CheckSummaryJsonPath(file + "/s.json").message(), {file + " is not a folder"}));
  for (const std::string& path : {folder, Tmp("no-folder") + "/s.json", file + "/s.json"}) {
    EXPECT_EQ(CheckSummaryJsonPath(path).code(), StatusCode::kInvalidArgument) << path;
  }
  EXPECT_NE(::access(Tmp("no-folder").c_str(), F_OK), 0);
  EXPECT_TRUE(std::filesystem::is_empty(folder));
  ::unlink(file.c_str());
  ::rmdir(folder.c_str());
}

// The end of a run writes the summary; when it cannot, the message says
// why, as the system does.
TEST(SummaryJsonPath, AFailedWriteSaysWhy) {
  LaunchSummary summary;
  const LaunchOptions options;
  const Status s = WriteSummaryJson(summary, options, Tmp("gone") + "/s.json");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(
      Says(s.message(), {"cannot open " + Tmp("gone") + "/s.json: No such file or directory"}));
  const std::string path = Tmp("summary-written.json");
  ASSERT_TRUE(WriteSummaryJson(summary, options, path).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), summary.ToJson(options) + "\n");
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace loco
