#include "common/flags.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/host_port.h"
#include "tests/common/says.h"

namespace loco {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  const char* operator()(const char* n) const {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  }
};

class FlagSetTest : public ::testing::Test {
 protected:
  FlagSetTest() : flags_("prog") {
    flags_.AddInt("workers", "LOCO_WORKERS", 4, 1, 64, "worker count", &workers_);
    flags_.AddDouble("lr", "LOCO_LR", 1e-3, 0, 1, "learning rate", &lr_);
    flags_.AddEnum("codec", "LOCO_CODEC", "loco", {"fp32", "loco"}, "codec", &codec_);
    flags_.AddBool("insecure", "LOCO_INSECURE", false, "plaintext", &insecure_);
  }
  Status Parse(std::vector<std::string> args) { return flags_.Parse(args, env_, &help_); }
  FlagSet flags_;
  Env env_;
  bool help_ = false, insecure_ = false;
  int64_t workers_ = 0;
  double lr_ = 0;
  std::string codec_;
};

TEST_F(FlagSetTest, DefaultsApplyWhenNothingGiven) {
  ASSERT_TRUE(Parse({}).ok());
  EXPECT_EQ(workers_, 4);
  EXPECT_DOUBLE_EQ(lr_, 1e-3);
  EXPECT_EQ(codec_, "loco");
  EXPECT_FALSE(insecure_);
}

TEST_F(FlagSetTest, FlagBeatsEnvironmentBeatsDefault) {
  env_.vars["LOCO_WORKERS"] = "8";
  env_.vars["LOCO_CODEC"] = "fp32";
  ASSERT_TRUE(Parse({"--workers=2", "--insecure"}).ok());
  EXPECT_EQ(workers_, 2);
  EXPECT_EQ(codec_, "fp32");
  EXPECT_TRUE(insecure_);
}

// Source tells a typed flag (even one typed with its default value) from
// one read from the environment and from one left at its default; a later
// Parse forgets the earlier one's sources.
TEST_F(FlagSetTest, SourceSaysWhereEachValueCameFrom) {
  env_.vars["LOCO_WORKERS"] = "8";
  env_.vars["LOCO_CODEC"] = "fp32";
  ASSERT_TRUE(Parse({"--codec=loco", "--lr", "1e-3"}).ok());
  EXPECT_EQ(flags_.Source("codec"), FlagSource::kCommandLine);  // beats $LOCO_CODEC
  EXPECT_EQ(flags_.Source("lr"), FlagSource::kCommandLine);     // the default, but typed
  EXPECT_EQ(flags_.Source("workers"), FlagSource::kEnvironment);
  EXPECT_EQ(flags_.Source("insecure"), FlagSource::kDefault);
  EXPECT_EQ(flags_.Source("no-such-flag"), FlagSource::kDefault);
  EXPECT_EQ(flags_.Origin("codec"), "--codec");
  EXPECT_EQ(flags_.Origin("workers"), "$LOCO_WORKERS");
  EXPECT_EQ(flags_.Origin("insecure"), "");
  env_.vars.clear();
  ASSERT_TRUE(Parse({}).ok());
  EXPECT_EQ(flags_.Source("codec"), FlagSource::kDefault);
  EXPECT_EQ(flags_.Source("workers"), FlagSource::kDefault);
}

TEST_F(FlagSetTest, SeparateValueForm) {
  ASSERT_TRUE(Parse({"--lr", "0.5"}).ok());
  EXPECT_DOUBLE_EQ(lr_, 0.5);
}

TEST_F(FlagSetTest, BadValuesNameFlagAndValidRange) {
  Status s = Parse({"--workers=0"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--workers"), std::string::npos);
  EXPECT_NE(s.message().find("[1, 64]"), std::string::npos);
  s = Parse({"--codec=int3"});
  EXPECT_NE(s.message().find("fp32|loco"), std::string::npos);
  s = Parse({"--lr=abc"});
  EXPECT_FALSE(s.ok());
  s = Parse({"--nope=1"});
  EXPECT_NE(s.message().find("unknown flag --nope"), std::string::npos);
  env_.vars["LOCO_WORKERS"] = "many";
  s = Parse({});
  EXPECT_NE(s.message().find("$LOCO_WORKERS"), std::string::npos);
}

// A checked string: a given value the check refuses is refused with its
// message; the default is not checked (empty can mean "not given").
TEST(FlagSetCheckedString, AGivenValueIsChecked) {
  FlagSet flags("prog");
  std::string address;
  flags.AddString("address", "PROG_ADDRESS", "", "host:port", CheckHostPort, &address);
  bool help = false;
  Env env;
  EXPECT_TRUE(flags.Parse({}, env, &help).ok());
  EXPECT_EQ(address, "");
  EXPECT_TRUE(Says(flags.Parse({"--address=127.0.0.1:99999"}, env, &help).message(),
                   {"prog: invalid value '127.0.0.1:99999' for --address: the port 99999 is "
                    "outside [1, 65535]"}));
  EXPECT_TRUE(Says(flags.Parse({"--address="}, env, &help).message(),
                   {"invalid value '' for --address", "expected host:port"}));
  env.vars["PROG_ADDRESS"] = "foo";
  EXPECT_TRUE(Says(flags.Parse({}, env, &help).message(),
                   {"invalid value 'foo' for $PROG_ADDRESS", "there is no port"}));
  ASSERT_TRUE(flags.Parse({"--address=[::1]:7000"}, env, &help).ok());
  EXPECT_EQ(address, "[::1]:7000");
}

TEST_F(FlagSetTest, HelpListsEnvAndDefault) {
  ASSERT_TRUE(Parse({"--help"}).ok());
  EXPECT_TRUE(help_);
  EXPECT_NE(flags_.Help().find("LOCO_WORKERS"), std::string::npos);
  EXPECT_NE(flags_.MarkdownRows().find("`--lr`"), std::string::npos);
}

// ParseCommandLine reads the real environment: its flag uses a variable no
// one sets.
class CommandLineTest : public ::testing::Test {
 protected:
  CommandLineTest() : flags_("prog") {
    flags_.AddInt("workers", "LOCO_FLAGS_TEST_UNSET_WORKERS", 4, 1, 64, "worker count",
                  &workers_);
  }
  std::optional<int> Run(std::vector<std::string> args) {
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return flags_.ParseCommandLine(static_cast<int>(argv.size()), argv.data(), out_, err_);
  }
  FlagSet flags_;
  int64_t workers_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(CommandLineTest, ValidFlagsCarryOn) {
  EXPECT_EQ(Run({"--workers=7"}), std::nullopt);
  EXPECT_EQ(workers_, 7);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandLineTest, MarkdownAndHelpPrintAndExitZero) {
  // The table is printed even beside a flag that would not parse.
  EXPECT_EQ(Run({"--workers=0", "--print-config-markdown"}), 0);
  EXPECT_EQ(out_.str(), flags_.MarkdownRows());
  out_.str("");
  EXPECT_EQ(Run({"--help"}), 0);
  EXPECT_EQ(out_.str(), flags_.Help());
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandLineTest, BadFlagPrintsTheReasonAndExitsTwo) {
  bool help = false;
  const Status expected =
      flags_.Parse({"--workers=65"}, [](const char*) -> const char* { return nullptr; }, &help);
  ASSERT_FALSE(expected.ok());
  EXPECT_EQ(Run({"--workers=65"}), 2);
  EXPECT_EQ(err_.str(), expected.message() + "\n");
  EXPECT_EQ(out_.str(), "");
}

}  // namespace
}  // namespace loco
