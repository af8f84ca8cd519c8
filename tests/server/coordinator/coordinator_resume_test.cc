// CoordinatorService after a restart, without a server: a worker of an
// earlier incarnation resumes under its id with the ticket its Join
// returned, when both starts read the same --ticket-key-file; a wrong
// ticket, a missing one and id 0 are refused; and a coordinator without a key file cannot tell
// whose id it is, so it answers NOT_FOUND (join again) and admits nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "security/worker_ticket.h"
#include "server/coordinator/coordinator_service.h"

namespace loco {
namespace {

using std::chrono::milliseconds;

class KeyFile {
 public:
  KeyFile() {
    char name[] = "/tmp/loco-resume-key-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    const std::string key = "0123456789abcdef0123456789abcdef-resume";
    EXPECT_EQ(write(fd, key.data(), key.size()), static_cast<ssize_t>(key.size()));
    close(fd);
    chmod(name, 0600);
    path_ = name;
  }
  ~KeyFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CoordinatorOptions Start(uint64_t incarnation, const std::string& key_file) {
  CoordinatorOptions o;
  o.membership.num_shards = 1;
  o.membership.shard_align = 128;
  o.membership.incarnation = incarnation;
  o.membership.recovery_window = milliseconds(60000);
  o.ticket_key_file = key_file;
  return o;
}

void UseKeyFile(CoordinatorService& service, const std::string& path) {
  auto key = WorkerTicketKey::FromFile(path);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  service.ConfigureAccess(nullptr, std::move(key).value());
}

grpc::Status Beat(CoordinatorService& service, uint64_t id, const std::string& ticket,
                  v1::HeartbeatResponse* resp) {
  v1::HeartbeatRequest req;
  req.set_worker_id(id);
  req.set_ticket(ticket);
  req.set_step(3);
  return service.Heartbeat(nullptr, &req, resp);
}

TEST(CoordinatorResume, AWorkerResumesWithItsTicketOnlyWhenTheKeyOutlivesTheProcess) {
  KeyFile key;
  CoordinatorService first(Start(1, key.path()));
  UseKeyFile(first, key.path());
  v1::JoinRequest join;
  join.set_name("w");
  join.set_total_elements(1000);
  v1::JoinResponse joined;
  ASSERT_TRUE(first.Join(nullptr, &join, &joined).ok());
  EXPECT_EQ(joined.worker_id(), Membership::kIdsPerIncarnation + 1);
  EXPECT_EQ(joined.view().incarnation(), 1u);
  ASSERT_FALSE(joined.ticket().empty());

  // Restarted with the same key file: the ticket vouches for the id.
  CoordinatorService second(Start(2, key.path()));
  UseKeyFile(second, key.path());
  v1::HeartbeatResponse resp;
  EXPECT_EQ(Beat(second, joined.worker_id(), "not-the-ticket", &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Roles are not separated here, yet an id of an earlier start resumes only
  // with its ticket: without one, or as id 0 (which names no worker), the
  // heartbeat is refused and admits nobody.
  const grpc::Status bare = Beat(second, joined.worker_id(), "", &resp);
  EXPECT_EQ(bare.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(bare.error_message().find("carries no ticket"), std::string::npos)
      << bare.error_message();
  const grpc::Status zero = Beat(second, 0, "", &resp);
  EXPECT_EQ(zero.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(zero.error_message().find("worker_id 0 names no worker"), std::string::npos)
      << zero.error_message();
  v1::LeaveRequest leave_zero;
  v1::LeaveResponse left;
  EXPECT_EQ(second.Leave(nullptr, &leave_zero, &left).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ClusterView view;
  ASSERT_TRUE(second.GetClusterView(nullptr, nullptr, &view).ok());
  EXPECT_EQ(view.worker_ids_size(), 0) << "a refused heartbeat admitted a worker";
  const grpc::Status resumed = Beat(second, joined.worker_id(), joined.ticket(), &resp);
  ASSERT_TRUE(resumed.ok()) << resumed.error_message();
  EXPECT_EQ(resp.incarnation(), 2u);
  EXPECT_EQ(resp.world_size(), 1u);
  view.Clear();
  ASSERT_TRUE(second.GetClusterView(nullptr, nullptr, &view).ok());
  ASSERT_EQ(view.worker_ids_size(), 1);
  EXPECT_EQ(view.worker_ids(0), joined.worker_id());

  // Restarted without a key file: its random key cannot check the ticket.
  CoordinatorService third(Start(3, ""));
  const grpc::Status unknown = Beat(third, joined.worker_id(), joined.ticket(), &resp);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.error_message().find("--ticket-key-file"), std::string::npos)
      << unknown.error_message();
  view.Clear();
  ASSERT_TRUE(third.GetClusterView(nullptr, nullptr, &view).ok());
  EXPECT_EQ(view.worker_ids_size(), 0);
}

}  // namespace
}  // namespace loco
