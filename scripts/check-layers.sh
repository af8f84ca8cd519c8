#!/usr/bin/env bash
# Checks that every source file includes only the folders its own folder may
# include, by the table in docs/DESIGN.md (§4, between the "layers:" markers),
# so that the document and the check cannot drift apart.
#
#   scripts/check-layers.sh [--root DIR]   check DIR (default: this checkout)
#   scripts/check-layers.sh --self-test    plant violations in a copy and
#                                          check that each one is reported
#
# What is checked: every .h/.cc/.cu/.cuh file (tracked by git, or every one
# under DIR when DIR is not a git checkout) and each of its lines of the form
# `#include "path"`. A file belongs to the longest folder of the table that
# its path starts with (worker/group/ before worker/); so does an included
# path. A bare name ending in .pb.h is generated from proto/; any other bare
# name is a file of the includer's own folder. Quoted paths outside the
# table's folders are not ours and are skipped. A folder may always include
# itself.
#
# Prints `file:line: <folder> may not include <path>` for every violation
# and `file: ...` for a source file outside the table's folders.
# Exit status: 0 clean, 1 violations, 2 the table cannot be read (or usage).
set -euo pipefail

TABLE_DOC=docs/DESIGN.md

usage() {
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
}

# Lists the C++ sources of $1, one path per line, relative to it.
list_sources() {
  local root=$1 top
  top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null || true)
  if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$(cd "$root" && pwd -P)" ]; then
    git -C "$root" ls-files -- '*.h' '*.cc' '*.cu' '*.cuh'
  else
    (cd "$root" && find . -mindepth 1 \( -path './build*' -o -name '.*' -o -name node_modules \) \
        -prune -o -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) \
        -print | sed 's|^\./||' | LC_ALL=C sort)
  fi
}

check() {
  local root=$1
  if [ ! -f "$root/$TABLE_DOC" ]; then
    echo "check-layers: $root/$TABLE_DOC not found" >&2
    return 2
  fi
  list_sources "$root" | (cd "$root" && awk -v doc="$TABLE_DOC" '
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    function table_error(msg) {
      printf "check-layers: %s: %s\n", doc, msg > "/dev/stderr"
      failed_table = 1
      exit 2
    }
    # The longest folder of the table that `path` lies in ("" when none).
    function folder_of(path,    f, best) {
      best = ""
      for (f in allowed)
        if (substr(path, 1, length(f) + 1) == f "/" && length(f) > length(best)) best = f
      return best
    }
    BEGIN {
      # ---- the table: rows between the markers, `| `folder/` | may include | job |`.
      in_table = 0; rows = 0
      while ((status = (getline line < doc)) > 0) {
        if (line ~ /<!-- *layers: *begin/) { in_table = 1; continue }
        if (line ~ /<!-- *layers: *end/) { in_table = 2; break }
        if (in_table != 1 || line !~ /^\|/) continue
        n = split(line, cell, "|")
        if (n < 4) table_error("row without three cells: " line)
        folder = trim(cell[2]); may = trim(cell[3])
        if (folder == "folder" || folder ~ /^-+$/) continue   # header, rule
        if (folder !~ /^`[a-z0-9_\/]+\/`$/) table_error("not a folder in backticks: " folder)
        folder = substr(folder, 2, length(folder) - 3)          # `a/b/` -> a/b
        if (folder in allowed) table_error("folder listed twice: " folder)
        rows++
        allowed[folder] = " "
        if (may == "anything") { anything[folder] = 1; continue }
        if (may == "nothing of ours") continue
        m = split(may, item, ",")
        for (i = 1; i <= m; i++) {
          it = trim(item[i])
          if (it !~ /^`[a-z0-9_\/]+\/`$/) table_error(folder ": not a folder in backticks: " it)
          it = substr(it, 2, length(it) - 3)
          allowed[folder] = allowed[folder] it " "
          named[it] = folder
        }
      }
      if (status < 0) table_error("cannot read it")
      if (in_table != 2) table_error("no <!-- layers: begin --> ... <!-- layers: end --> table")
      if (rows == 0) table_error("the layer table has no rows")
      for (it in named)
        if (!(it in allowed)) table_error(named[it] ": names " it "/, which has no row")
      violations = 0
    }
    # ---- the sources, one path per input line.
    {
      file = $0
      owner = folder_of(file)
      if (owner == "") {
        printf "%s: in no folder of the layer table (%s §4); add a row for it\n", file, doc
        violations++
        next
      }
      if (owner in anything) next
      lineno = 0
      while ((status = (getline src < file)) > 0) {
        lineno++
        if (src !~ /^[ \t]*#[ \t]*include[ \t]*"/) continue
        rest = substr(src, index(src, "\"") + 1)
        q = index(rest, "\"")
        if (q == 0) continue
        inc = substr(rest, 1, q - 1)
        target = folder_of(inc)
        if (target == "") {
          if (index(inc, "/") == 0 && inc ~ /\.pb\.h$/) target = "proto"
          else continue   # a file of the same folder, or not ours
        }
        if (target == owner || index(allowed[owner], " " target " ") > 0) continue
        printf "%s:%d: %s may not include %s\n", file, lineno, owner, inc
        violations++
      }
      if (status < 0) { printf "%s: cannot read it\n", file; violations++ }
      close(file)
    }
    END {
      if (failed_table) exit 2
      if (violations > 0) {
        printf "check-layers: %d include(s) break the layer table of %s (§4)\n", violations, doc \
            > "/dev/stderr"
        exit 1
      }
    }')
}

# Copies the sources and the table of $1 into the new folder $2.
copy_tree() {
  local root=$1 dest=$2
  mkdir -p "$dest/docs"
  cp "$root/$TABLE_DOC" "$dest/$TABLE_DOC"
  list_sources "$root" | (cd "$root" && tar -cf - -T -) | tar -C "$dest" -xf -
}

self_test() {
  local root=$1 tmp status failures=0
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-layers.XXXXXX")
  SELF_TEST_TMP=$tmp
  trap 'rm -rf "$SELF_TEST_TMP"' EXIT
  copy_tree "$root" "$tmp/tree"

  expect() {  # expect <what> <grep -F pattern> <file>
    if grep -qF -- "$2" "$3"; then echo "ok: $1"
    else echo "FAIL: $1: no line with '$2' in:"; sed 's/^/  /' "$3"; failures=$((failures + 1)); fi
  }
  refuse() {  # refuse <what> <grep -F pattern> <file>
    if grep -qF -- "$2" "$3"; then
      echo "FAIL: $1: unexpected '$2' in:"; sed 's/^/  /' "$3"; failures=$((failures + 1))
    else echo "ok: $1"; fi
  }

  # The copy as it is: whatever it reports, the planted files must add to it.
  status=0; check "$tmp/tree" >"$tmp/base" 2>/dev/null || status=$?
  if [ "$status" -gt 1 ]; then echo "FAIL: the copy's table cannot be read"; return 1; fi

  # Violations (and includes that are fine) planted in new files.
  plant() {  # plant <file> <line>...: writes a file of the given lines
    local file=$tmp/tree/$1; shift
    mkdir -p "$(dirname "$file")"
    printf '%s\n' "$@" >"$file"
  }
  plant client/planted_violation.cc '// A planted violation.' '#include <vector>' \
    '#include "models/mlp.h"' '#include "client/worker_options.h"' '#include "rpc/rpc_status.h"'
  plant server/planted_violation.cc '#include "server/coordinator/membership.h"' \
    '#include "server/coordinator_client.h"' '  #  include "kernels/adamw.h"'
  plant server/coordinator/planted_violation.cc '#include "server/shard_store.h"' \
    '#include "server/coordinator/membership.h"'
  plant worker/group/planted_violation.cc '#include "worker/training_loop.h"'
  plant worker/planted_fine.cc '#include "worker/group/local_group.h"' '#include "client/worker.h"'
  plant launch/planted_violation.cc '// #include "models/mlp.h" in a comment is no include' \
    '#include "client/worker.h"' '#include "health.grpc.pb.h"' '#include "gtest/gtest.h"'
  plant tests/planted_fine.cc '#include "server/coordinator/membership.h"' '#include "models/mlp.h"'
  plant nowhere/planted.cc '#include "common/status.h"'

  status=0; check "$tmp/tree" >"$tmp/out" 2>&1 || status=$?
  if [ "$status" -eq 1 ]; then echo "ok: exits 1 with violations"
  else echo "FAIL: exit status $status with violations, not 1"; failures=$((failures + 1)); fi
  expect "client may not include models/" \
    "client/planted_violation.cc:3: client may not include models/mlp.h" "$tmp/out"
  expect "shard side may not include the coordinator" \
    "server/planted_violation.cc:1: server may not include server/coordinator/membership.h" "$tmp/out"
  expect "the coordinator may not include the shard side" \
    "server/coordinator/planted_violation.cc:1: server/coordinator may not include server/shard_store.h" \
    "$tmp/out"
  expect "worker/group may not include worker/" \
    "worker/group/planted_violation.cc:1: worker/group may not include worker/training_loop.h" "$tmp/out"
  expect "launch may not include client/" \
    "launch/planted_violation.cc:2: launch may not include client/worker.h" "$tmp/out"
  expect "a bare generated header counts as proto/" \
    "launch/planted_violation.cc:3: launch may not include health.grpc.pb.h" "$tmp/out"
  expect "a file outside the table's folders" "nowhere/planted.cc: in no folder" "$tmp/out"
  refuse "server/coordinator_client.h is the shard side's own" "planted_violation.cc:2: server may" \
    "$tmp/out"
  refuse "allowed includes pass" "client/planted_violation.cc:4" "$tmp/out"
  refuse "allowed includes pass (rpc)" "client/planted_violation.cc:5" "$tmp/out"
  refuse "indented directives are read" "server/planted_violation.cc:3" "$tmp/out"
  refuse "a folder includes itself" "server/coordinator/planted_violation.cc:2" "$tmp/out"
  refuse "worker/ may include worker/group/" "worker/planted_fine.cc" "$tmp/out"
  refuse "a comment is no include" "launch/planted_violation.cc:1:" "$tmp/out"
  refuse "paths outside our folders are skipped" "launch/planted_violation.cc:4:" "$tmp/out"
  refuse "tests/ may include anything" "tests/planted_fine.cc" "$tmp/out"
  # Nothing else: the planted files add exactly the lines above (9 with the summary).
  grep -vxF -f "$tmp/base" "$tmp/out" >"$tmp/added" || true
  if [ "$(grep -c . "$tmp/added")" -eq 8 ]; then echo "ok: nothing else reported"
  else echo "FAIL: expected 8 new lines:"; sed 's/^/  /' "$tmp/added"; failures=$((failures + 1)); fi
  rm -rf "$tmp/tree/nowhere" "$tmp"/tree/*/planted_* "$tmp"/tree/*/*/planted_*

  # The table drives the check: take models/ from worker/'s row.
  sed -i '/layers: *begin/,/layers: *end/ s#^\(| `worker/` |.*\)`models/`, #\1#' \
    "$tmp/tree/$TABLE_DOC"
  status=0; check "$tmp/tree" >"$tmp/out" 2>&1 || status=$?
  expect "a row of the table is the rule" ": worker may not include models/" "$tmp/out"

  # A table that cannot be read stops the check (exit 2), it does not pass.
  sed -i '/layers: *begin/d' "$tmp/tree/$TABLE_DOC"
  status=0; check "$tmp/tree" >"$tmp/out" 2>&1 || status=$?
  if [ "$status" -eq 2 ]; then echo "ok: no table, exit 2"
  else echo "FAIL: no table gave exit status $status, not 2"; failures=$((failures + 1)); fi

  if [ "$failures" -gt 0 ]; then
    echo "check-layers self-test: $failures failure(s)"
    return 1
  fi
  echo "check-layers self-test: passed"
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=check
while [ $# -gt 0 ]; do
  case $1 in
    --root) ROOT=$2; shift 2 ;;
    --self-test) MODE=self-test; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "check-layers: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$MODE" = self-test ]; then
  self_test "$ROOT"
else
  check "$ROOT"
fi
