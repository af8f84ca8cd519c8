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

// Numbers are plain decimal: strtoll and strtod also took a leading '+' or
// spaces and hexadecimal floats ("0x1p3" was 8); each such value is refused,
// saying which form is expected, while the range's message stays as it was
// for a well-formed number.
TEST_F(FlagSetTest, NumbersArePlainDecimal) {
  for (const std::string bad : {"+5", " 5", "5 ", "0x10", "1e1", "5.0", "", "-"}) {
    const Status s = Parse({"--workers=" + bad});
    const std::string expected =
        "' for --workers: expected an integer in [1, 64], written in plain decimal (digits with "
        "an optional leading '-'; no '+', spaces or hex)";
    EXPECT_TRUE(Says(s.message(), {"invalid value '" + bad + expected})) << bad;
  }
  for (const std::string bad : {"+0.5", " 0.5", "0.5 ", "0x1p-3", "0X.8p0", "inf", "nan", "1e",
                                "e3", ".", "1e+", "--1", "1,5"}) {
    const Status s = Parse({"--lr=" + bad});
    const std::string expected =
        "' for --lr: expected a number in [0, 1], written in plain decimal with an optional "
        "exponent (such as 0.001 or 1e-3; no '+', spaces or hex)";
    EXPECT_TRUE(Says(s.message(), {"invalid value '" + bad + expected})) << bad;
  }
  for (const std::string good : {"0.5", ".5", "5e-1", "00.50", "50E-2", "5e-01", "0.05e+1"}) {
    ASSERT_TRUE(Parse({"--lr=" + good}).ok()) << good;
    EXPECT_DOUBLE_EQ(lr_, 0.5) << good;
  }
  ASSERT_TRUE(Parse({"--lr=0."}).ok());
  EXPECT_EQ(lr_, 0);
  ASSERT_TRUE(Parse({"--workers=007"}).ok());
  EXPECT_EQ(workers_, 7);
  // Well formed but out of range: the message is the range's alone.
  EXPECT_EQ(Parse({"--workers=-5"}).message(),
            "prog: invalid value '-5' for --workers: expected an integer in [1, 64]");
  EXPECT_EQ(Parse({"--lr=2"}).message(),
            "prog: invalid value '2' for --lr: expected a number in [0, 1]");
  // The environment is held to the same form.
  env_.vars["LOCO_WORKERS"] = "+8";
  EXPECT_TRUE(Says(Parse({}).message(), {"'+8' for $LOCO_WORKERS", "no '+'"}));
}

// AddFloat's numbers are held to the same form.
TEST(FlagSetFloat, NumbersArePlainDecimal) {
  FlagSet flags("prog");
  double lr = 0;
  flags.AddFloat("lr", "", 1e-3, {.min = 0, .max = 10, .min_excluded = true}, "", &lr);
  bool help = false;
  for (const std::string bad : {"+1e-3", " 1e-3", "0x1p-10"}) {
    EXPECT_TRUE(Says(flags.Parse({"--lr=" + bad}, Env{}, &help).message(),
                     {"expected a number in (0, 10]", "written in plain decimal"}))
        << bad;
  }
  EXPECT_EQ(flags.Parse({"--lr=0"}, Env{}, &help).message(),
            "prog: invalid value '0' for --lr: expected a number in (0, 10]");
}

// The conventions flags.h states: a repeated flag takes its last value, and
// an empty environment variable is as if unset.
TEST_F(FlagSetTest, TheLastRepeatedFlagWinsAndAnEmptyVariableIsUnset) {
  env_.vars["LOCO_WORKERS"] = "";
  env_.vars["LOCO_CODEC"] = "";
  ASSERT_TRUE(Parse({}).ok());
  EXPECT_EQ(workers_, 4);
  EXPECT_EQ(codec_, "loco");
  EXPECT_EQ(flags_.Source("workers"), FlagSource::kDefault);
  ASSERT_TRUE(Parse({"--workers=2", "--workers", "3"}).ok());
  EXPECT_EQ(workers_, 3);
}

// A value refused from the environment names the variable and the flag it
// stands for; a typed one names the flag as before. Named gives that form
// to the binaries' own checks.
TEST_F(FlagSetTest, ARefusedEnvironmentValueNamesTheVariableAndItsFlag) {
  env_.vars["LOCO_WORKERS"] = "99";
  EXPECT_EQ(Parse({}).message(),
            "prog: invalid value '99' for $LOCO_WORKERS (for --workers): expected an integer in "
            "[1, 64]");
  EXPECT_EQ(Parse({"--workers=99"}).message(),
            "prog: invalid value '99' for --workers: expected an integer in [1, 64]");
  env_.vars["LOCO_WORKERS"] = "8";
  ASSERT_TRUE(Parse({"--lr=0.5"}).ok());
  EXPECT_EQ(flags_.Named("workers"), "$LOCO_WORKERS (for --workers)");
  EXPECT_EQ(flags_.Named("lr"), "--lr");
  EXPECT_EQ(flags_.Named("codec"), "--codec");  // the default
  EXPECT_EQ(flags_.NamedWithValue("workers", "8"), "$LOCO_WORKERS=8 (for --workers)");
  EXPECT_EQ(flags_.NamedWithValue("lr", "0.5"), "--lr 0.5");
}

// CheckFlagsTakeEffect: a typed flag its other settings ignore is refused
// with the reason (the first in the conditions' order), one from the
// environment is a note, one left at its default or taking effect is
// nothing.
TEST_F(FlagSetTest, AFlagThatWouldHaveNoEffectIsRefusedWhenTypedAndNotedFromTheEnvironment) {
  const std::vector<FlagCondition> conditions = {
      {"workers", [this] { return codec_ == "fp32" ? "only --codec loco uses it" : ""; }},
      {"lr", [this] { return codec_ == "fp32" ? "fp32 has no rate" : ""; }},
  };
  std::vector<std::string> notes;
  ASSERT_TRUE(Parse({"--codec=fp32", "--lr=0.5", "--workers=2"}).ok());
  EXPECT_EQ(CheckFlagsTakeEffect(flags_, conditions, &notes).message(),
            "--workers has no effect here: only --codec loco uses it; remove it, or change the "
            "setting it depends on");
  env_.vars["LOCO_WORKERS"] = "8";
  ASSERT_TRUE(Parse({"--codec=fp32"}).ok());
  EXPECT_TRUE(CheckFlagsTakeEffect(flags_, conditions, &notes).ok());
  EXPECT_EQ(notes, std::vector<std::string>{
                       "$LOCO_WORKERS is set but has no effect here: only --codec loco uses it"});
  notes.clear();
  ASSERT_TRUE(Parse({"--codec=loco", "--lr=0.5"}).ok());
  EXPECT_TRUE(CheckFlagsTakeEffect(flags_, conditions, &notes).ok());
  EXPECT_TRUE(notes.empty());
}

// The bounds read back as the values they are: with six significant
// digits, 0.999999999 printed as 1, and a value above it looked inside.
TEST(FlagSetBounds, ARangeIsPrintedWithRoundTripPrecision) {
  FlagSet flags("prog");
  double beta = 0;
  flags.AddDouble("beta", "", 0.5, 0, 0.999999999, "", &beta);
  bool help = false;
  const Status s = flags.Parse({"--beta=0.9999999995"}, Env{}, &help);
  EXPECT_EQ(s.message(),
            "prog: invalid value '0.9999999995' for --beta: expected a number in [0, 0.999999999]");
  flags.AddDouble("gamma", "", 0.1 + 0.2, 0, 1, "", &beta);
  EXPECT_NE(flags.Help().find("default '0.30000000000000004'"), std::string::npos) << flags.Help();
}

// A float flag is checked as the program uses it, rounded to float: a
// value whose float is out of range is refused, saying so, even where the
// double is inside; one whose float is inside passes, and the flag keeps
// the value as given.
TEST(FlagSetFloat, TheRangeIsCheckedOnTheValueRoundedToFloat) {
  FlagSet flags("prog");
  double beta2 = 0, lr = 0;
  const float below_one = 1.0f - 0x1p-24f;
  flags.AddFloat("beta2", "", 0.999, {.min = 0, .max = below_one}, "", &beta2);
  flags.AddFloat("lr", "", 1e-3, {.min = 0, .max = 10, .min_excluded = true}, "", &lr);
  bool help = false;
  auto parse = [&](const std::string& arg) { return flags.Parse({arg}, Env{}, &help); };
  // 0.99999999 is below 1, but 1 as a float.
  EXPECT_EQ(parse("--beta2=0.99999999").message(),
            "prog: invalid value '0.99999999' for --beta2: expected a number in [0, 0.99999994] "
            "as a 32-bit float, which the program computes with; as one it is 1");
  ASSERT_TRUE(parse("--beta2=0.99999996").ok());  // 0.99999994 as a float
  EXPECT_EQ(beta2, 0.99999996);
  ASSERT_TRUE(parse("--beta2=0.99999994").ok());
  EXPECT_EQ(static_cast<float>(beta2), below_one);
  // An excluded minimum, and a value that rounds to it.
  EXPECT_EQ(parse("--lr=0").message(),
            "prog: invalid value '0' for --lr: expected a number in (0, 10]");
  EXPECT_TRUE(Says(parse("--lr=1e-300").message(), {"(0, 10]", "as one it is 0"}));
  EXPECT_TRUE(Says(parse("--lr=1e39").message(), {"(0, 10]", "as one it is inf"}));
  EXPECT_TRUE(Says(parse("--lr=abc").message(), {"expected a number in (0, 10]"}));
  ASSERT_TRUE(parse("--lr=1e-7").ok());
  EXPECT_EQ(lr, 1e-7);
  EXPECT_NE(flags.Help().find("default '0.001'"), std::string::npos) << flags.Help();
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
