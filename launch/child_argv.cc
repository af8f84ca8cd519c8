#include "launch/child_argv.h"

#include "common/format_double.h"

namespace loco {
namespace {

void Append(std::vector<std::string> more, std::vector<std::string>* argv) {
  for (std::string& arg : more) argv->push_back(std::move(arg));
}

struct PushCodec {
  const char* name;
  bool quantizes;  // codes of --bits bits, else full-precision values
};
constexpr PushCodec kPushCodecs[] = {
    {"fp32", false}, {"bf16", false}, {"naive", true}, {"ef", true}, {"loco", true}};

}  // namespace

std::vector<std::string> PushCodecNames() {
  std::vector<std::string> names;
  for (const PushCodec& codec : kPushCodecs) names.push_back(codec.name);
  return names;
}

bool QuantizesToBits(const std::string& codec) {
  for (const PushCodec& known : kPushCodecs) {
    if (codec == known.name) return known.quantizes;
  }
  return false;
}

std::vector<std::string> CoordinatorArgv(const LaunchOptions& options) {
  std::vector<std::string> argv = {
      options.bin_dir + "/loco-coordinator", "--port=0",
      "--num-servers=" + std::to_string(options.servers),
      "--heartbeat-timeout-ms=" + std::to_string(options.heartbeat_timeout_ms)};
  Append(TransportSecurityArgs(options.security, TransportRole::kServer), &argv);
  return argv;
}

std::vector<std::string> ServerArgv(const LaunchOptions& options, int shard,
                                    const std::string& coordinator) {
  std::vector<std::string> argv = {options.bin_dir + "/loco-server",
                                   "--port=0",
                                   "--shard-id=" + std::to_string(shard),
                                   "--num-servers=" + std::to_string(options.servers),
                                   "--coordinator=" + coordinator,
                                   "--lr=" + FormatDouble(options.lr)};
  Append(TransportSecurityArgs(options.security, TransportRole::kServerAndClient), &argv);
  if (!options.pull_codec.empty()) argv.push_back("--pull-codec=" + options.pull_codec);
  if (!options.checkpoint_dir.empty()) {
    argv.push_back("--checkpoint-dir=" + options.checkpoint_dir);
    if (options.checkpoint_every > 0) {
      argv.push_back("--checkpoint-every=" + std::to_string(options.checkpoint_every));
    }
  }
  argv.insert(argv.end(), options.server_args.begin(), options.server_args.end());
  return argv;
}

std::vector<std::string> WorkerArgv(const LaunchOptions& options, const std::string& coordinator,
                                    uint64_t total_steps) {
  std::vector<std::string> argv = {options.bin_dir + "/loco-worker",
                                   "--coordinator=" + coordinator,
                                   "--codec=" + options.codec,
                                   "--global-batch=" + std::to_string(options.global_batch),
                                   "--steps=" + std::to_string(total_steps),
                                   "--seed=" + std::to_string(options.seed)};
  if (QuantizesToBits(options.codec)) {
    argv.push_back("--bits=" + std::to_string(options.bits));
    argv.push_back("--block-size=" + std::to_string(options.block_size));
  }
  Append(TransportSecurityArgs(options.security, TransportRole::kClient), &argv);
  if (!options.hidden.empty()) argv.push_back("--hidden=" + options.hidden);
  if (!options.data_dir.empty()) argv.push_back("--data-dir=" + options.data_dir);
  argv.insert(argv.end(), options.worker_args.begin(), options.worker_args.end());
  return argv;
}

Status CheckSharedEnvironment(const std::function<const char*(const char*)>& lookup) {
  struct Shared {
    const char* name;
    bool port;
    const char* instead;
  };
  for (const Shared& v :
       {Shared{"LOCO_HEALTH_PORT", true, "the children serve no health port under loco-launch"},
        Shared{"LOCO_METRICS_PORT", true,
               "for metrics give --prometheus, which picks a port per process"},
        Shared{"LOCO_ADVERTISE_ADDRESS", false,
               "the local servers advertise the loopback addresses they listen on"}}) {
    const char* value = lookup(v.name);
    if (value == nullptr || *value == '\0' || (v.port && std::string(value) == "0")) continue;
    return InvalidArgument(std::string(v.name) + "=" + value +
                           " is in the environment, which every process loco-launch starts "
                           "inherits: " +
                           (v.port ? "each would bind that port"
                                   : "every server would "
                                     "advertise that address") +
                           "; unset it (" + v.instead + ")");
  }
  return Status::Ok();
}

}  // namespace loco
