# Sourced by the *_vs_pytorch.sh benchmarks: finds their files (beside the
# script, or in its runfiles under `bazel run`), lets the mixrt binary find
# its plugins through the script's runfiles, and picks a Python with torch
# ($PYTHON, else /root/torchvenv, else Debian's python3).
if [ -z "${RUNFILES_DIR:-}" ] && [ -d "$0.runfiles" ]; then
  export RUNFILES_DIR="$0.runfiles"
fi

# The path of benchmarks/$1.
peer_file() {
  local path
  path="$(dirname "$0")/$1"
  [ -f "$path" ] || path="$0.runfiles/mixrt/benchmarks/$1"
  echo "$path"
}

# Runs benchmarks/$1 with the remaining arguments under a Python that has
# torch, or says how to get one.
run_pytorch_peer() {
  local script python="${PYTHON:-}" candidate
  script=$(peer_file "$1")
  shift
  for candidate in /root/torchvenv/bin/python /usr/bin/python3; do
    if [ -z "$python" ] && "$candidate" -c "import torch" 2>/dev/null; then
      python=$candidate
    fi
  done
  if [ -n "$python" ]; then
    "$python" "$script" "$@"
  else
    echo "PyTorch not installed (python3 -m venv v && v/bin/pip install torch;"
    echo "then PYTHON=v/bin/python): no comparison"
  fi
}
