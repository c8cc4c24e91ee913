#!/usr/bin/env bash
# Copy branches' code into folders of this working tree, so that one GPU call can test and time
# them all against this tree (scripts/gpu_branches.sh). On the CPU machine:
#
#   scripts/branch_trees.sh trees fwd-fewer-barriers bwd-fewer-barriers
#
# writes trees/<branch>/ with the branch's src/, tests/, scripts/ and pyproject.toml (from git,
# not the working tree), and a COMMIT file holding the branch's short hash (for the bench
# JSON's meta, see scripts/gpu_ab.sh). The folder travels to the GPU machine as an untracked
# file; do not commit it, and remove it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/branch_trees.sh DIR BRANCH..." >&2; exit 2; }
DIR=$1; shift
for branch in "$@"; do
  git rev-parse --verify --quiet "$branch^{commit}" > /dev/null \
      || { echo "branch_trees.sh: no branch or commit $branch" >&2; exit 2; }
  dest="$DIR/$branch"
  rm -rf "$dest"; mkdir -p "$dest"
  git archive "$branch" src tests scripts pyproject.toml | tar -x -C "$dest"
  git rev-parse --short "$branch" > "$dest/COMMIT"
  echo "$dest: $(cat "$dest/COMMIT")"
done
