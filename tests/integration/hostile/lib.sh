# Sourced by the hostile cases (tests/integration/hostile.sh runs each as
# `bash case_NAME.sh XTRAIN SRCDIR WORK`, in WORK, with TMPDIR=WORK).
set -euo pipefail
xtrain=$1
srcdir=$2
work=$3
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
unset OMP_WAIT_POLICY

# guard_neighbours DIR: records the hashes (and symlink targets) of everything under DIR;
# check_neighbours DIR: fails naming what changed, appeared or vanished since.
guard_neighbours() { tree_hashes "$1" > "$work/.neighbours.$(echo "$1" | md5sum | cut -c1-8)"; }
check_neighbours() {
  local saved="$work/.neighbours.$(echo "$1" | md5sum | cut -c1-8)"
  diff "$saved" <(tree_hashes "$1") || fail "files under $1 changed (diff above: < before, > after)"
}
tree_hashes() {
  (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r path; do
    if [[ -L $path ]]; then echo "link $path -> $(readlink "$path")"
    elif [[ -f $path ]]; then echo "file $path $(sha256sum < "$path" | cut -c1-64)"
    else echo "dir  $path"; fi
  done)
}
