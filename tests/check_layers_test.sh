#!/usr/bin/env bash
# scripts/check-layers.sh must fail on each kind of violation and pass on a
# clean tree (run by CTest). The fake tree's includes carry the project's
# prefix, as the real tree's do; a few violations are written without it or
# as <sluice/...>, which the check must catch as well.
set -u
script=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
tree() {
  rm -rf "$t/tree"
  mkdir -p "$t/tree/runtime/policy" "$t/tree/messages" "$t/tree/actors" \
           "$t/tree/runtime/node"
  echo '#include "sluice/runtime/policy/time.hpp"' > "$t/tree/runtime/policy/a.hpp"
  echo '#include "sluice/messages/atoms.hpp"' > "$t/tree/messages/b.hpp"
  echo '#include "sluice/messages/b.hpp"' > "$t/tree/actors/c.cpp"
  echo '#include "sluice/actors/c.hpp"' > "$t/tree/runtime/node/d.cpp"
  echo '#include "actors/c.hpp"' >> "$t/tree/runtime/node/d.cpp"
}
expect() { # $1: want exit status, $2: what
  bash "$script" "$t/tree" > "$t/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$1" ]; then
    echo "FAIL: $2: exit $rc, wanted $1"; cat "$t/out"; fails=1
  fi
}
tree; expect 0 "a clean tree"
tree; echo '#include "sluice/actors/c.hpp"' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy includes actors"
tree; echo '#include "actors/c.hpp"' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy includes actors (no prefix)"
tree; echo '#include <sluice/actors/c.hpp>' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy includes actors (<sluice/...>)"
tree; echo '#include <caf/actor.hpp>' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy includes CAF"
tree; echo 'auto x = std::chrono::steady_clock::now();' >> "$t/tree/runtime/policy/a.hpp"
expect 1 "policy reads a clock"
tree; echo '#include "sluice/actors/c.hpp"' >> "$t/tree/messages/b.hpp"
expect 1 "messages include actors"
tree; echo '#include "sluice/runtime/redis/client.hpp"' >> "$t/tree/actors/c.cpp"
expect 1 "an actor includes runtime/"
tree; echo '  #  include <hiredis/hiredis.h>' >> "$t/tree/actors/c.cpp"
expect 1 "an actor includes hiredis"
tree; echo '#include "sluice/tests/x.hpp"' >> "$t/tree/runtime/node/d.cpp"
expect 1 "runtime includes tests/"
tree; echo '#include "tests/x.hpp"' >> "$t/tree/runtime/node/d.cpp"
expect 1 "runtime includes tests/ (no prefix)"
exit $fails
