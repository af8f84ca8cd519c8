// main() of every test binary: runs the tests with a temporary directory of
// their own, so that a run leaves nothing behind in /tmp.
//
// Before any test runs, a fresh directory
// <TEST_TMPDIR or TMPDIR or /tmp>/loco-test.XXXXXX is made and TEST_TMPDIR
// is pointed at it, which is where ::testing::TempDir() (read on every
// call) and the child processes the tests start put their files. After the
// run it is removed when every test passed, and kept, with its path
// printed, when one failed: its logs are what explains the failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace {

std::string BaseTempDir() {
  for (const char* name : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && v[0] != '\0') return v;
  }
  return "/tmp";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string tmpl = BaseTempDir() + "/loco-test.XXXXXX";
  const char* made = ::mkdtemp(tmpl.data());
  if (made == nullptr) {
    std::perror(("cannot make a temporary directory from " + tmpl).c_str());
    return 1;
  }
  const std::string dir = made;
  ::setenv("TEST_TMPDIR", dir.c_str(), /*overwrite=*/1);
  const int result = RUN_ALL_TESTS();
  if (result == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) std::fprintf(stderr, "could not remove %s: %s\n", dir.c_str(), ec.message().c_str());
  } else {
    std::fprintf(stderr, "the failed run's files are kept in %s\n", dir.c_str());
  }
  return result;
}
