#!/usr/bin/env bash
# scripts/check-layers.sh must fail on each kind of violation and pass on a
# clean tree (run by CTest).
set -u
script=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
tree() {
  rm -rf "$t/tree"
  mkdir -p "$t/tree/runtime/policy" "$t/tree/messages" "$t/tree/actors" \
           "$t/tree/runtime/node"
  echo '#include "runtime/policy/time.hpp"' > "$t/tree/runtime/policy/a.hpp"
  echo '#include "messages/atoms.hpp"' > "$t/tree/messages/b.hpp"
  echo '#include "messages/b.hpp"' > "$t/tree/actors/c.cpp"
  echo '#include "actors/c.hpp"' > "$t/tree/runtime/node/d.cpp"
}
expect() { # $1: want exit status, $2: what
  bash "$script" "$t/tree" > "$t/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$1" ]; then
    echo "FAIL: $2: exit $rc, wanted $1"; cat "$t/out"; fails=1
  fi
}
tree; expect 0 "a clean tree"
tree; echo '#include "actors/c.hpp"' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy includes actors"
tree; echo '#include <caf/actor.hpp>' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy includes CAF"
tree; echo 'auto x = std::chrono::steady_clock::now();' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy reads a clock"
tree; echo '#include "actors/c.hpp"' >> "$t/tree/messages/b.hpp"
expect 1 "messages include actors"
tree; echo '#include "runtime/redis/client.hpp"' >> "$t/tree/actors/c.cpp"
expect 1 "an actor includes runtime/"
tree; echo '  #  include <hiredis/hiredis.h>' >> "$t/tree/actors/c.cpp"
expect 1 "an actor includes hiredis"
tree; echo '#include "tests/x.hpp"' >> "$t/tree/runtime/node/d.cpp"
expect 1 "runtime includes tests/"
exit $fails
