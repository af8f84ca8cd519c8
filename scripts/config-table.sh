#!/usr/bin/env bash
# Prints the README's configuration table from the binaries themselves
# and from `python3 -m loco_ps.run` (--print-config-markdown), so that the
# table and the code never disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
echo "| binary | flag | environment | default | meaning |"
echo "| --- | --- | --- | --- | --- |"
for b in loco-launch loco-coordinator loco-server loco-worker loco-health-probe loco-plan; do
  "$BIN/$b" --print-config-markdown
done
PYTHONPATH=${BUILD_DIR:-build}/python /usr/bin/python3 -m loco_ps.run --print-config-markdown
