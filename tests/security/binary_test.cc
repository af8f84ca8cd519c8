// The real binaries refuse to start without transport security, and say
// what to pass; --insecure starts them (and logs the plaintext warning).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` with no LOCO_* security variables in its environment under
// `timeout`; `command` starts with timeout's arguments (the bound).
Outcome RunCommand(const std::string& command) {
  const std::string full =
      "env -u LOCO_INSECURE -u LOCO_TLS_CERT -u LOCO_TLS_KEY -u LOCO_TLS_CA "
      "-u LOCO_AUTH_TOKEN_FILE timeout " + command + " 2>&1";
  Outcome o;
  std::FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.output.append(buf.data(), n);
  const int status = ::pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

const std::string kBin = LOCO_BIN_DIR;

TEST(Binaries, RefuseToStartWithNeitherTlsNorInsecure) {
  for (const std::string& command :
       {"20 " + kBin + "/loco-coordinator --num-servers=1",
        "20 " + kBin + "/loco-server --coordinator=127.0.0.1:1",
        "20 " + kBin + "/loco-worker --coordinator=127.0.0.1:1 --steps=1"}) {
    Outcome o = RunCommand(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("--insecure"), std::string::npos) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("--tls-"), std::string::npos) << command << "\n" << o.output;
  }
}

TEST(Binaries, RefuseContradictionsAndMissingFilesAsUsageErrors) {
  Outcome both = RunCommand("20 " + kBin + "/loco-coordinator --num-servers=1 --insecure --tls-ca=/etc/hostname");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("contradicts"), std::string::npos) << both.output;
  Outcome missing = RunCommand("20 " + kBin + "/loco-coordinator --num-servers=1 --tls-cert=/nonexistent.pem "
                               "--tls-key=/nonexistent.key");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent.pem"), std::string::npos) << missing.output;
  Outcome launch = RunCommand("20 " + kBin + "/loco-launch --insecure --tls-ca=/etc/hostname --steps=1");
  EXPECT_EQ(launch.exit_code, 2) << launch.output;
  // The health port is a second listener: it cannot be the service's port.
  for (const std::string& command :
       {"20 " + kBin + "/loco-coordinator --num-servers=1 --insecure --port=7311 --health-port=7311",
        "20 " + kBin + "/loco-server --coordinator=127.0.0.1:1 --insecure --port=7312 "
                       "--health-port=7312"}) {
    Outcome same = RunCommand(command);
    EXPECT_EQ(same.exit_code, 2) << command << "\n" << same.output;
    EXPECT_NE(same.output.find("--health-port 73"), std::string::npos) << same.output;
    EXPECT_NE(same.output.find("must differ from --port"), std::string::npos) << same.output;
  }
}

TEST(Binaries, InsecureStartsAndWarns) {
  // timeout stops the coordinator after one second; 124 is timeout's code
  // for "still running", i.e. it started and served.
  Outcome o = RunCommand("-s INT 1 " + kBin + "/loco-coordinator --num-servers=1 --insecure");
  EXPECT_NE(o.output.find("LISTENING"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("plaintext: for trusted networks only"), std::string::npos) << o.output;
}

}  // namespace
