#!/usr/bin/env bash
# Gives every project-internal #include the project's prefix:
#   #include "runtime/policy/time.hpp"  ->  #include "sluice/runtime/policy/time.hpp"
# in the C++ files of actors/ messages/ runtime/ examples/ bench/ tests/
# fuzz/, so the same include works in the build tree (where
# build/include/sluice is a symlink to the source root) and in an install
# (include/sluice/...), and a consumer's include path holds include/, never
# include/sluice (which would let "runtime/..." collide with the service's
# own folders). Test-local includes ("virtual_time.hpp", "fakes/...") stay.
#
# An include is rewritten only when the file it names exists under the
# source root (a test's own "runtime/x.hpp" beside it would stay); the
# others are listed. Then it deletes the lines of CMakeLists.txt marked
# `sluice-unprefixed-includes` (the source root on the include path, kept
# only while unprefixed includes remained).
#
# Mechanical and idempotent: a second run changes nothing. After a merge
# that brought new unprefixed includes, run it again.
# Usage: scripts/prefix-includes.sh [ROOT] (default: this checkout).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

dirs=()
for d in actors messages runtime examples bench tests fuzz; do
  [ -d "$d" ] && dirs+=("$d")
done

changed=0
while IFS= read -r -d '' f; do
  grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(actors|messages|runtime)/' "$f" ||
    continue
  SLUICE_ROOT=$root perl -i -pe '
    if (/^(\s*#\s*include\s*")((?:actors|messages|runtime)\/[^"]+)"/) {
      if (-f "$ENV{SLUICE_ROOT}/$2") {
        s/^(\s*#\s*include\s*")((?:actors|messages|runtime)\/[^"]+)"/$1sluice\/$2"/;
      } else {
        print STDERR "prefix-includes: $ARGV:$.: left as is (no $2 in the source root)\n";
      }
    }
    close ARGV if eof;  # line numbers per file
  ' "$f"
  changed=$((changed + 1))
done < <(find "${dirs[@]}" -type f \( -name '*.hpp' -o -name '*.cpp' \
           -o -name '*.h' -o -name '*.cc' \) -print0 | sort -z)

if grep -q 'sluice-unprefixed-includes' CMakeLists.txt; then
  perl -i -ne 'print unless /sluice-unprefixed-includes/' CMakeLists.txt
  echo "prefix-includes: CMakeLists.txt: the source root left the include path"
fi
echo "prefix-includes: $changed file(s) had unprefixed internal includes"
