#!/usr/bin/env bash
# Builds the project's container image from this checkout with podman and
# smoke-runs it: one loco-coordinator, one loco-server and one loco-worker,
# each in its own container from the image, with the worker and server roles
# separated by their own tokens (as deploy/k8s runs them), and checks that
# the worker finished its steps, that the gRPC health probe in the image answers for the
# coordinator and the server, that the PyTorch example
# (examples/torch_fashion_mnist.py) trains a few steps on a loco_ps.Cluster
# started inside a container and, as deploy/k8s/overlays/torch runs it, as
# one worker of a running cluster (worker token, metrics port, read-only
# root file system), and that the server exits cleanly on SIGTERM.
#
# No image registry is reachable where this runs, so the `debian:bookworm`
# base is made locally with debootstrap (minbase) from the Debian mirror that
# apt uses, and imported under the names the Dockerfile's FROM lines use.
# The base tarball and podman's storage are kept in $LOCO_IMAGE_CACHE, so a
# second run reuses the base and every unchanged build layer.
#
# It FAILS (exit 1), saying why, when it cannot do its job (not root, podman
# or debootstrap missing, the build or the run fails); it never skips.
#
# Environment:
#   LOCO_IMAGE_CACHE   state folder: base tarball, podman storage and config
#                      (default /var/cache/loco-image)
#   LOCO_IMAGE_TAG     image name (default localhost/loco-ps:ci)
#   LOCO_IMAGE_DRIVER  podman storage driver: auto (overlay when the kernel
#                      can mount it here, else vfs), overlay or vfs
#   LOCO_IMAGE_MIRROR  Debian mirror for debootstrap (default: the first
#                      deb.debian.org-style URI in /etc/apt/sources.list*)
#   LOCO_IMAGE_JOBS    compile jobs inside the build (default 2)
#   LOCO_IMAGE_STEPS   training steps of the smoke runs (loco-worker and the
#                      PyTorch example; default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)

CACHE=${LOCO_IMAGE_CACHE:-/var/cache/loco-image}
TAG=${LOCO_IMAGE_TAG:-localhost/loco-ps:ci}
DRIVER=${LOCO_IMAGE_DRIVER:-auto}
JOBS=${LOCO_IMAGE_JOBS:-2}
STEPS=${LOCO_IMAGE_STEPS:-5}
SUITE=bookworm

fail() { echo "image.sh: FAIL: $*" >&2; exit 1; }
say() { echo "image.sh: $*"; }
T0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - T0 ))s"; }

# ------------------------------------------------------------ preconditions
[ "$(id -u)" -eq 0 ] || fail "must run as root: podman here uses root storage, and debootstrap needs root to make the base image (uid $(id -u))"
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "'$tool' is not installed (scripts/install-deps.sh installs podman, runc and debootstrap from Debian)"
done
case "$DRIVER" in auto|overlay|vfs) ;; *) fail "LOCO_IMAGE_DRIVER must be auto, overlay or vfs (got '$DRIVER')";; esac
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || fail "LOCO_IMAGE_JOBS must be a positive integer (got '$JOBS')"
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || fail "LOCO_IMAGE_STEPS must be a positive integer (got '$STEPS')"
mkdir -p "$CACHE" || fail "cannot create the cache folder $CACHE"

# ------------------------------------------------------------ podman configuration
# Our own configuration files, passed through podman's environment variables,
# so that nothing under /etc is edited and nothing outside $CACHE changes.
#  - runtime runc: Debian's podman defaults to crun, which is not installed.
#  - cgroup manager cgroupfs: there is no systemd to ask for cgroups here.
#  - events in a file: there is no journald either.
#  - storage overlay when this kernel mounts it (fast, shares layers), else
#    vfs (full copies, but works inside any sandbox, nested ones included).
if [ "$DRIVER" = auto ]; then
  probe=$(mktemp -d "$CACHE/overlay-probe.XXXXXX")
  mkdir -p "$probe"/{l,u,w,m}
  if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
    umount "$probe/m"; DRIVER=overlay
  else
    DRIVER=vfs
  fi
  rm -rf "$probe"
fi
export CONTAINERS_CONF="$CACHE/containers.conf"
export CONTAINERS_STORAGE_CONF="$CACHE/storage-$DRIVER.conf"
export CONTAINERS_REGISTRIES_CONF="$CACHE/registries.conf"
# Podman raises a container's open-file and process limits to its own
# maxima by default; where the hard limits are lower (a sandbox), runc then
# fails with "error setting rlimit type 7" (or 6). Containers get this
# process's hard limits instead.
NOFILE=$(ulimit -Hn); [ "$NOFILE" = unlimited ] && NOFILE=1048576
# (Processes: at most 32768 as well, which is plenty for one LoCo process and
# is what a sandbox measured here still granted where its own hard limit,
# 96364, was refused.)
NPROC=$(ulimit -Hu); { [ "$NPROC" = unlimited ] || [ "$NPROC" -gt 32768 ]; } && NPROC=32768
cat >"$CONTAINERS_CONF" <<EOF
[containers]
# Host network: no CNI bridge or iptables is needed, and RUN apt-get in the
# build reaches the Debian mirror the host reaches.
netns = "host"
default_ulimits = ["nofile=$NOFILE:$NOFILE", "nproc=$NPROC:$NPROC"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$CACHE/events.log"
tmp_dir = "$CACHE/tmp"
EOF
cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "$DRIVER"
graphroot = "$CACHE/storage-$DRIVER"
runroot = "$CACHE/run-$DRIVER"
EOF
# No registry is reachable: short names resolve to local images only.
cat >"$CONTAINERS_REGISTRIES_CONF" <<EOF
unqualified-search-registries = []
short-name-mode = "disabled"
EOF
# Builds RUN steps in a chroot rather than a nested container: no user
# namespace or cgroup setup is needed inside a sandbox.
export BUILDAH_ISOLATION=chroot
PODMAN=(podman --cgroup-manager=cgroupfs --runtime=runc)
"${PODMAN[@]}" info --format '{{.Store.GraphDriverName}}' >/dev/null 2>"$CACHE/info.err" ||
  fail "podman does not start here: $(tail -n 3 "$CACHE/info.err")"
say "podman $(podman --version | awk '{print $3}'), storage $DRIVER in $CACHE, runtime runc, cgroups cgroupfs"
# An interrupted earlier build leaves its working containers behind (GBs
# each); the storage is this script's own, so none of them is in use.
leftover=$("${PODMAN[@]}" ps -a --external -q 2>/dev/null || true)
if [ -n "$leftover" ]; then
  "${PODMAN[@]}" rm -f $leftover >/dev/null 2>&1 || true
fi

# ------------------------------------------------------------ base image
# The Dockerfile's FROM names are debian:bookworm and debian:bookworm-slim;
# both are the same minbase here (minbase is already slim: no docs stripping
# beyond what apt's own settings do, but no recommends, ~150 MB).
mirror=${LOCO_IMAGE_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
           grep -v security | head -n 1 | awk '{print $2}' || true)
fi
[ -n "$mirror" ] || fail "no Debian mirror found in /etc/apt/sources.list*; set LOCO_IMAGE_MIRROR"
BASE_TAR="$CACHE/debian-$SUITE-minbase.tar"
if ! "${PODMAN[@]}" image exists "docker.io/library/debian:$SUITE"; then
  if [ ! -s "$BASE_TAR" ]; then
    say "debootstrap --variant=minbase $SUITE from $mirror ($(elapsed))"
    root="$CACHE/rootfs.tmp"
    rm -rf "$root"
    debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
      fail "debootstrap failed (log: $CACHE/debootstrap.log): $(tail -n 3 "$CACHE/debootstrap.log")"
    # apt inside the image uses the same mirror and the security archive.
    cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb ${mirror%/debian*}/debian-security $SUITE-security main
EOF
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
    rm -rf "$root"
  fi
  say "importing the base as debian:$SUITE and debian:$SUITE-slim ($(elapsed))"
  "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' "$BASE_TAR" "docker.io/library/debian:$SUITE" >/dev/null ||
    fail "podman import of $BASE_TAR failed"
fi
"${PODMAN[@]}" tag "docker.io/library/debian:$SUITE" "docker.io/library/debian:$SUITE-slim"

# ------------------------------------------------------------ build
say "building $TAG from $SRC ($(elapsed))"
# Docker format: the OCI format has no HEALTHCHECK, and podman would drop it.
"${PODMAN[@]}" build --pull=never --network=host --layers --format=docker \
  --build-arg "JOBS=$JOBS" -t "$TAG" -f Dockerfile . >"$CACHE/build.log" 2>&1 ||
  fail "image build failed (log: $CACHE/build.log):
$(tail -n 30 "$CACHE/build.log")"
say "built $TAG ($(elapsed)); size $("${PODMAN[@]}" image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"

# ------------------------------------------------------------ smoke run
# Host network (as in the build): the three containers talk over loopback.
# Every container is removed on exit, whatever happened.
RUN_ID=$$
C_COORD="loco-smoke-coordinator-$RUN_ID" C_SERVER="loco-smoke-server-$RUN_ID" C_WORKER="loco-smoke-worker-$RUN_ID"
C_PYTHON="loco-smoke-python-$RUN_ID"
# A second cluster for the joined PyTorch worker (below).
C_COORD2="loco-smoke-coordinator2-$RUN_ID" C_SERVER2="loco-smoke-server2-$RUN_ID"
C_TORCH="loco-smoke-torch-$RUN_ID"
V_STATE="loco-smoke-state-$RUN_ID"  # the coordinator's state directory, as in deploy/compose.yaml
# Separated roles, as deploy/k8s has them: the coordinator and the server
# take both tokens, the worker presents (and sees) only the worker token.
AUTH_DIR=$(mktemp -d)
cleanup() {
  "${PODMAN[@]}" rm -f -t 0 "$C_COORD" "$C_SERVER" "$C_WORKER" "$C_PYTHON" "$C_COORD2" \
    "$C_SERVER2" "$C_TORCH" >/dev/null 2>&1 || true
  "${PODMAN[@]}" volume rm -f "$V_STATE" >/dev/null 2>&1 || true
  rm -rf "$AUTH_DIR"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
COORD_PORT=$(free_port) SERVER_PORT=$(free_port)
COORD_HEALTH=$(free_port) SERVER_HEALTH=$(free_port)
for role in worker server; do
  python3 -c 'import secrets; print(secrets.token_hex(32))' >"$AUTH_DIR/$role-token"
done
chmod 755 "$AUTH_DIR" && chmod 644 "$AUTH_DIR"/*  # the image's user reads them
ROLE_TOKENS=(-v "$AUTH_DIR:/etc/loco/auth:ro" -e LOCO_WORKER_TOKEN_FILE=/etc/loco/auth/worker-token
  -e LOCO_SERVER_TOKEN_FILE=/etc/loco/auth/server-token)
# --health-interval=disable: no systemd timer runs the HEALTHCHECK (there is
# no systemd here); the script runs it itself with `podman healthcheck run`.
# (Podman 4.3 still logs "unable to get systemd connection to add
# healthchecks" at start and removal; that message is harmless here.)
RUN=("${PODMAN[@]}" run --network=host --health-interval=disable)
# Plaintext must be asked for explicitly (the smoke run stays on this host's
# loopback); every binary refuses to start without TLS material or this flag.
insecure() { echo --insecure; }
logs_of() { "${PODMAN[@]}" logs "$1" 2>&1 | tail -n 20; }

say "smoke run: coordinator :$COORD_PORT, server :$SERVER_PORT, worker $STEPS steps ($(elapsed))"
# The ports come from LOCO_PORT and LOCO_HEALTH_PORT so that the image's own
# HEALTHCHECK (which asks LOCO_HEALTH_PORT, the plaintext port without a
# token, as Kubernetes' probes do) is exercised below.
# The coordinator keeps its state (incarnation, worker-ticket key) in a named
# volume, as deploy/compose.yaml has it: the image's non-root user must be
# able to write there.
"${RUN[@]}" -d --name "$C_COORD" -e LOCO_HOST=127.0.0.1 -e "LOCO_PORT=$COORD_PORT" \
  -e "LOCO_HEALTH_PORT=$COORD_HEALTH" "${ROLE_TOKENS[@]}" \
  -e LOCO_STATE_DIR=/var/lib/loco/state -v "$V_STATE:/var/lib/loco/state" "$TAG" \
  loco-coordinator --num-servers=1 $(insecure loco-coordinator) >/dev/null ||
  fail "cannot start the coordinator container"
"${RUN[@]}" -d --name "$C_SERVER" -e LOCO_HOST=127.0.0.1 -e "LOCO_PORT=$SERVER_PORT" \
  -e "LOCO_HEALTH_PORT=$SERVER_HEALTH" "${ROLE_TOKENS[@]}" "$TAG" \
  loco-server --shard-id=0 --num-servers=1 --coordinator="127.0.0.1:$COORD_PORT" \
  --checkpoint-dir=/var/lib/loco/checkpoints $(insecure loco-server) >/dev/null ||
  fail "cannot start the server container"

# Both answer the health check (the probe in the image, through the image's
# HEALTHCHECK), within a bounded wait.
for c in "$C_COORD" "$C_SERVER"; do
  ok=0
  for _ in $(seq 1 60); do
    if "${PODMAN[@]}" healthcheck run "$c" >/dev/null 2>&1; then ok=1; break; fi
    [ "$("${PODMAN[@]}" inspect --format '{{.State.Running}}' "$c")" = true ] ||
      fail "$c exited before it served: $(logs_of "$c")"
    sleep 1
  done
  [ "$ok" = 1 ] || fail "$c never reported healthy within 60 s: $(logs_of "$c")"
done
out=$("${PODMAN[@]}" exec "$C_SERVER" loco-health-probe --address="127.0.0.1:$SERVER_HEALTH") ||
  fail "loco-health-probe in the image does not see the server SERVING"
say "health: $out"

# The worker trains a small MLP for $STEPS steps on the image's Fashion-MNIST
# and exits 0 with a "done" event; bounded by timeout.
set +e
wout=$(timeout 600 "${PODMAN[@]}" run --network=host --no-healthcheck --name "$C_WORKER" \
  -v "$AUTH_DIR/worker-token:/etc/loco/auth/worker-token:ro" \
  -e LOCO_AUTH_TOKEN_FILE=/etc/loco/auth/worker-token "$TAG" \
  loco-worker --coordinator="127.0.0.1:$COORD_PORT" --steps="$STEPS" --hidden=64 \
  --global-batch=64 --eval=none $(insecure loco-worker) 2>&1)
wrc=$?
set -e
[ "$wrc" -eq 0 ] || fail "the worker exited with $wrc:
$(echo "$wout" | tail -n 20)
server: $(logs_of "$C_SERVER")"
echo "$wout" | grep -q "\"event\":\"done\",.*\"steps\":$STEPS" ||
  fail "the worker exited 0 without a done event at step $STEPS:
$(echo "$wout" | tail -n 20)"
say "worker: $(echo "$wout" | grep '"event":"done"' | tail -n 1)"
# The roles were separated: the server required the worker's tickets, and
# nobody warned otherwise.
slog=$("${PODMAN[@]}" logs "$C_SERVER" 2>&1)
grep -q "shard calls need their worker's ticket" <<<"$slog" ||
  fail "the server did not separate the roles: $(logs_of "$C_SERVER")"
! grep -q "roles are not separated" <<<"$slog$("${PODMAN[@]}" logs "$C_COORD" 2>&1)" ||
  fail "a program ran with the roles not separated: $(logs_of "$C_SERVER")"
say "roles: separated (worker and server tokens, tickets on the shard calls)"

# The PyTorch example in the image: 2 worker processes with LoCo-4 for
# $STEPS steps, against a loco_ps.Cluster it starts inside the container
# from the image's programs (Debian's python3, numpy and torch; the image's
# Fashion-MNIST).
pyout=$(timeout 600 "${PODMAN[@]}" run --rm --network=host --no-healthcheck --name "$C_PYTHON" "$TAG" python3 \
  /usr/local/share/loco-ps/examples/torch_fashion_mnist.py --workers=2 --max-steps="$STEPS" 2>&1) &&
  echo "$pyout" | grep -q "^final test accuracy .* after $STEPS steps" ||
  fail "the PyTorch example does not run in the image:
$(echo "$pyout" | tail -n 20)"
say "python: $(echo "$pyout" | grep '^final test accuracy')"

# The PyTorch example as deploy/k8s/overlays/torch runs it: one worker of a
# running cluster found in its LOCO_* environment, presenting the worker
# token, serving its /metrics, on a read-only root file system (the pods'
# readOnlyRootFilesystem). Its own
# coordinator and server: a cluster's first join fixes its model size, and
# the one above holds loco-worker's MLP.
COORD2_PORT=$(free_port) SERVER2_PORT=$(free_port)
"${RUN[@]}" -d --name "$C_COORD2" "${ROLE_TOKENS[@]}" "$TAG" loco-coordinator --host=127.0.0.1 \
  --port="$COORD2_PORT" --num-servers=1 $(insecure loco-coordinator) >/dev/null ||
  fail "cannot start the second coordinator container"
"${RUN[@]}" -d --name "$C_SERVER2" "${ROLE_TOKENS[@]}" "$TAG" loco-server --host=127.0.0.1 \
  --port="$SERVER2_PORT" --shard-id=0 --num-servers=1 --coordinator="127.0.0.1:$COORD2_PORT" \
  $(insecure loco-server) >/dev/null || fail "cannot start the second server container"
# The cluster comes from the environment, as the overlay's pods carry it;
# the image's LOCO_METRICS_HOST (0.0.0.0) applies as it does there.
tout=$(timeout 600 "${PODMAN[@]}" run --rm --network=host --no-healthcheck --read-only \
  --name "$C_TORCH" -v "$AUTH_DIR/worker-token:/etc/loco/auth/worker-token:ro" \
  -e "LOCO_COORDINATOR=127.0.0.1:$COORD2_PORT" -e LOCO_INSECURE=true \
  -e LOCO_AUTH_TOKEN_FILE=/etc/loco/auth/worker-token -e LOCO_METRICS_PORT=-1 \
  -e LOCO_NAME=torch-smoke "$TAG" python3 \
  /usr/local/share/loco-ps/examples/torch_fashion_mnist.py --workers=1 \
  --max-steps="$STEPS" 2>&1) &&
  echo "$tout" | grep -q "^metrics: http://0\.0\.0\.0:[0-9]*/metrics" &&
  echo "$tout" | grep -q "^epoch 1 ($STEPS of [0-9]* steps): .*test accuracy" &&
  echo "$tout" | grep -q "^done: pushed" ||
  fail "the PyTorch example does not join a running cluster in the image:
$(echo "$tout" | tail -n 20)
server: $(logs_of "$C_SERVER2")"
grep -q "torch-smoke" <<<"$("${PODMAN[@]}" logs "$C_COORD2" 2>&1)" ||
  fail "the second coordinator never saw the joined PyTorch worker: $(logs_of "$C_COORD2")"
"${PODMAN[@]}" rm -f -t 10 "$C_COORD2" "$C_SERVER2" >/dev/null
say "python, joined: $(echo "$tout" | grep '^done: pushed')"

# SIGTERM: the server writes its final checkpoint and exits 0, as it must
# under Kubernetes' termination.
"${PODMAN[@]}" stop -t 30 "$C_SERVER" >/dev/null
src=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$C_SERVER")
[ "$src" = 0 ] || fail "the server exited with $src on SIGTERM: $(logs_of "$C_SERVER")"
ver=$("${PODMAN[@]}" logs "$C_SERVER" 2>&1 | sed -n 's/.*shutdown checkpoint at version \([0-9]*\) written.*/\1/p' | tail -n 1)
[ -n "$ver" ] && [ "$ver" -ge "$STEPS" ] ||
  fail "the server did not write its final checkpoint (version >= $STEPS) on SIGTERM: $(logs_of "$C_SERVER")"
say "server: final checkpoint at version $ver on SIGTERM, exit 0"
"${PODMAN[@]}" stop -t 30 "$C_COORD" >/dev/null
crc=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$C_COORD")
[ "$crc" = 0 ] || fail "the coordinator exited with $crc on SIGTERM: $(logs_of "$C_COORD")"
# Started again on its volume, it keeps the worker-ticket key its first
# start made (so that workers resume under their ids after a restart).
"${PODMAN[@]}" start "$C_COORD" >/dev/null || fail "cannot start the coordinator again"
clog=""
for _ in $(seq 1 60); do
  clog=$("${PODMAN[@]}" logs "$C_COORD" 2>&1 || true)
  grep -q "ticket.key (kept)" <<<"$clog" && break
  sleep 0.5
done
grep -q "ticket.key (new)" <<<"$clog" && grep -q "ticket.key (kept)" <<<"$clog" ||
  fail "the coordinator did not make its ticket key in its state volume and keep it: $(logs_of "$C_COORD")"
"${PODMAN[@]}" stop -t 30 "$C_COORD" >/dev/null
say "coordinator: ticket key made in its state volume, kept after a restart"
say "OK: image built and smoke-run in $(elapsed)"
