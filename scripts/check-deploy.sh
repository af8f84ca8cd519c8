#!/usr/bin/env bash
# Offline checks of the deployment files (CI runs this from scripts/test.sh):
#  1. `kubectl kustomize` renders every overlay (deploy/k8s/overlays/*) and
#     the monitoring add-on;
#  2. every rendered object is valid against the Kubernetes schemas (npm
#     package kubernetes-models) and the project's rules (deploy/check/validate.js:
#     unknown fields, images, selectors, named ports, mounts, files named by
#     settings, shard count, network policies that let LoCo-PS's flows
#     through and leave none of its pods unselected);
#  3. each deliberately broken manifest in deploy/check/testdata fails, with
#     the message it expects (so the rules can fail);
#  4. the Dockerfile lints clean (dockerfile-utils), a broken one does not;
#  5. deploy/compose.yaml passes its checks (and `docker-compose config` or
#     `podman-compose config` when one is installed), a broken one does not;
#     promtool accepts the compose Prometheus configuration.
# The npm packages are installed with `npm ci` from the committed
# package-lock.json, again only when the lock file changed.
# Exit 0 when everything passes; 1 (saying what) otherwise, including when a
# tool it needs is missing: it never skips silently.
#
# Environment: LOCO_KUBECTL (kubectl to use; default kubectl on the PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CHECK="$ROOT/deploy/check"
KUBECTL=${LOCO_KUBECTL:-kubectl}
failures=0
fail() { echo "check-deploy: FAIL: $*" >&2; failures=$((failures + 1)); }
die() { echo "check-deploy: FAIL: $*" >&2; exit 1; }
say() { echo "check-deploy: $*"; }

command -v "$KUBECTL" >/dev/null 2>&1 || die "kubectl not found (scripts/install-deps.sh installs Debian's kubernetes-client; or set LOCO_KUBECTL)"
command -v node >/dev/null 2>&1 || die "node not found (scripts/install-deps.sh installs Debian's nodejs)"
command -v npm >/dev/null 2>&1 || die "npm not found (scripts/install-deps.sh installs Debian's npm)"
command -v promtool >/dev/null 2>&1 || die "promtool not found (scripts/install-deps.sh installs Debian's prometheus)"

# ------------------------------------------------------------ npm packages
stamp="$CHECK/node_modules/.loco-lock-sha256"
want=$(sha256sum "$CHECK/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  say "npm ci in deploy/check"
  (cd "$CHECK" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in deploy/check (is the npm registry reachable?)"
  echo "$want" >"$stamp"
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ------------------------------------------------------------ render + validate
say "kubectl $("$KUBECTL" version --client 2>/dev/null | head -n 1)"
render() {  # render DIR OUT
  if ! "$KUBECTL" kustomize "$1" >"$2" 2>"$2.err"; then
    fail "kubectl kustomize $1: $(grep -v '^# Warning' "$2.err" | head -n 5)"
    return 1
  fi
  [ -s "$2" ] || { fail "kubectl kustomize $1 rendered nothing"; return 1; }
}
render deploy/k8s/monitoring "$TMP/monitoring.yaml" || true
overlays=(deploy/k8s/overlays/*/)
[ ${#overlays[@]} -gt 0 ] || die "no overlays under deploy/k8s/overlays"
for o in "${overlays[@]}"; do
  name=$(basename "$o")
  render "$o" "$TMP/$name.yaml" || continue
  # Together with the PodMonitor, whose selector and port must find the pods.
  if out=$(node "$CHECK/validate.js" "$TMP/$name.yaml" "$TMP/monitoring.yaml" 2>&1); then
    say "overlay $name: $(echo "$out" | tail -n 1)"
  else
    fail "overlay $name does not validate:
$out"
  fi
done

# ------------------------------------------------------------ the rules can fail
expect_failure() {  # expect_failure FILE COMMAND...: must exit 1 and print every "# expect:" line
  local file=$1; shift
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [ "$rc" -ne 1 ]; then fail "$file: expected exit 1 (refused), got $rc:
$out"; return; fi
  local missing=0
  while IFS= read -r exp; do
    grep -qF -- "$exp" <<<"$out" || { fail "$file: refused, but without '$exp':
$out"; missing=1; }
  done < <(sed -n 's/^# expect: //p' "$file")
  [ "$missing" = 1 ] || say "refused as expected: $(basename "$file")"
}
n=0
for f in "$CHECK"/testdata/*.yaml; do
  case "$(basename "$f")" in compose-*) continue;; esac
  grep -q '^# expect: ' "$f" || { fail "$f has no '# expect:' line"; continue; }
  expect_failure "$f" node "$CHECK/validate.js" "$f"; n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no broken manifests in deploy/check/testdata"

# ------------------------------------------------------------ Dockerfile
if out=$(node "$CHECK/lint-dockerfile.js" Dockerfile 2>&1); then say "$(echo "$out" | tail -n 1)"; else fail "Dockerfile lint:
$out"; fi
expect_failure "$CHECK/testdata/broken.Dockerfile" node "$CHECK/lint-dockerfile.js" "$CHECK/testdata/broken.Dockerfile"

# ------------------------------------------------------------ compose
if out=$(node "$CHECK/validate-compose.js" deploy/compose.yaml 2>&1); then say "$(echo "$out" | tail -n 1)"; else fail "deploy/compose.yaml:
$out"; fi
for f in "$CHECK"/testdata/compose-*.yaml; do
  expect_failure "$f" node "$CHECK/validate-compose.js" "$f"
done
if command -v docker-compose >/dev/null 2>&1; then
  docker-compose -f deploy/compose.yaml config -q || fail "docker-compose config refuses deploy/compose.yaml"
elif command -v podman-compose >/dev/null 2>&1; then
  podman-compose -f deploy/compose.yaml config >/dev/null || fail "podman-compose config refuses deploy/compose.yaml"
else
  say "no docker-compose/podman-compose installed: compose.yaml checked by validate-compose.js only"
fi
# promtool checks the rule files a configuration names: point the compose
# configuration's in-container path at the repository's rules.
sed "s|/etc/prometheus/rules/|$ROOT/deploy/prometheus/rules/|" deploy/compose/prometheus.yml >"$TMP/prometheus.yml"
if out=$(promtool check config "$TMP/prometheus.yml" 2>&1); then say "promtool: deploy/compose/prometheus.yml OK"; else fail "promtool check config deploy/compose/prometheus.yml:
$out"; fi

if [ "$failures" -gt 0 ]; then
  echo "check-deploy: $failures check(s) failed" >&2
  exit 1
fi
say "OK"
