// IdentifyCaller: the RolePolicy applied to one gRPC call — its bearer token
// (the `authorization: Bearer <token>` metadata, left in place for this
// purpose when role tokens are configured) and, with certificate roles, the
// names of its verified client certificate (CN and SANs from gRPC's
// AuthContext). The thin gRPC edge of security/caller_role.h.
#pragma once

#include <grpcpp/server_context.h>

#include "security/caller_role.h"

namespace loco {

// `policy` null: roles are not checked; the caller holds both.
CallerIdentity IdentifyCaller(const grpc::ServerContext& ctx, const RolePolicy* policy);

}  // namespace loco
