#!/usr/bin/env bash
# Training across two hosts (network namespaces on this machine, a 10
# Gbit/s link, Open MPI over TCP: netns_hosts.sh) equals the same training
# on one host with 2 ranks, bit for bit: the recipe MLP under bf16 autocast
# with the bf16 compression hook, and a small GPT with dropout. Then the
# faults across hosts: the link going down, a rank that never joins and a
# rank killed end the job within the collective timeout with a message
# naming the rank and its host; a checkpoint the two hosts wrote resumes
# on one.
#   multihost_mpi_test.sh WORKER FAULT_WORKER CHECKPOINT_WORKER MPIRUN_TEST
#                         NETNS_HOSTS
set -uo pipefail
worker=$1
fault_worker=$2
ckpt_worker=$3
runner=$4
source "$5"
export MIXRT_NUM_THREADS=1

why=$(hosts_available)
if [ -n "$why" ]; then
  # Bazel has no "skipped" for a shell test: say so loudly, pass.
  echo "SKIPPED: two hosts cannot be made here: $why"
  exit 0
fi
fail=0

one_host=$(timeout 300 "$runner" 2 "$worker" 4 2>&1)
rc=$?
echo "--- one host, 2 ranks (rc=$rc)"
echo "$one_host" | grep -v '^\s*$' | tail -5
hosts_up 10gbit
echo "--- two hosts: $HOSTS_SHAPING, $HOSTS_SHAPER"
two_hosts=$(hosts_mpirun "$worker" 4 2>&1)
rc2=$?
echo "--- two hosts, 1 rank each (rc=$rc2)"
echo "$two_hosts" | grep -v '^\s*$' | tail -5
if [ "$rc" -ne 0 ] || [ "$rc2" -ne 0 ]; then
  echo "FAIL: a run failed"
  fail=1
fi
hashes() { grep -o 'mlp [0-9a-f]* gpt [0-9a-f]*' <<<"$1" | sort -u; }
if [ "$(hashes "$one_host" | wc -l)" -ne 1 ] ||
   [ "$(hashes "$two_hosts" | wc -l)" -ne 1 ] ||
   [ "$(hashes "$one_host")" != "$(hashes "$two_hosts")" ]; then
  echo "FAIL: the ranks or the runs ended with other parameters"
  fail=1
fi
for host in "$MIXRT_HOST_A_NAME" "$MIXRT_HOST_B_NAME"; do
  if ! grep -q "on $host:" <<<"$two_hosts"; then
    echo "FAIL: no rank ran on $host"
    fail=1
  fi
done

# Faults across hosts, each within the collective timeout.
export MIXRT_DIST_TIMEOUT_S=3
expect() {  # expect WHAT RC SECONDS OUTPUT TEXT...
  local what=$1 rc=$2 seconds=$3 out=$4
  shift 4
  echo "--- $what: rc=$rc in ${seconds}s"
  echo "$out" | grep -v '^\s*$' | head -20
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$seconds" -gt 30 ]; then
    echo "FAIL ($what): want a failure within 30 s"
    fail=1
  fi
  for text in "$@"; do
    if ! grep -qF -- "$text" <<<"$out"; then
      echo "FAIL ($what): the output does not say: $text"
      fail=1
    fi
  done
}

# Host A's link goes down while both ranks train (rank 1 takes it down at
# step 3 and carries on): each side's all-reduce times out and names the
# other rank and its host, within the collective timeout (3 s) plus the
# time to ask the peers (2 s). mpirun cannot end a job whose far daemon it
# cannot reach: once both errors are in, the test ends the processes.
logs=$(mktemp -d)
start=$SECONDS
MIXRT_FAULT_LOG_DIR=$logs \
  MIXRT_FAULT_LINK_DOWN="ip -n $MIXRT_HOST_A_NS link set $HOSTS_DEV_A down" \
  HOSTS_TIMEOUT=120 hosts_mpirun -x MIXRT_FAULT_LINK_DOWN -x MIXRT_FAULT_LOG_DIR \
  "$fault_worker" linkdown >"$logs/mpirun.log" 2>&1 &
while [ $((SECONDS - start)) -lt 30 ]; do
  if [ -s "$logs/rank0.log" ] && [ -s "$logs/rank1.log" ]; then break; fi
  sleep 0.5
done
seconds=$((SECONDS - start))
hosts_kill_all
wait
out=$(cat "$logs/rank0.log" "$logs/rank1.log" 2>/dev/null)
expect "link down" 1 "$seconds" "$out" \
  "rank 0 (on $MIXRT_HOST_A_NAME): all_reduce" \
  "rank 1 (on $MIXRT_HOST_B_NAME) does not answer" \
  "rank 1 (on $MIXRT_HOST_B_NAME): all_reduce" \
  "rank 0 (on $MIXRT_HOST_A_NAME) does not answer"
rm -rf "$logs"
hosts_link up

# A checkpoint written by the two hosts resumes on one host and ends where
# the uninterrupted run ended (checkpoint_worker compares).
ckpt=$(mktemp -d "${TEST_TMPDIR:-/tmp}/ckpt.XXXXXX")
if ! hosts_mpirun "$ckpt_worker" save "$ckpt" >"$ckpt/save.log" 2>&1 ||
   ! "$runner" 2 "$ckpt_worker" resume "$ckpt" >"$ckpt/resume.log" 2>&1; then
  echo "FAIL: a checkpoint saved on two hosts did not resume on one"
  cat "$ckpt"/*.log
  fail=1
else
  echo "--- checkpoint saved on two hosts, resumed on one"
  grep -v '^\s*$' "$ckpt/resume.log" | tail -3
fi
rm -rf "$ckpt"

# Rank 1 on host B never joins the job: rank 0 on host A stops waiting
# after the timeout and says so with its rank and host.
start=$SECONDS
out=$(HOSTS_TIMEOUT=120 hosts_mpirun "$fault_worker" nojoin 2>&1)
rc=$?
expect "rank never joins" "$rc" $((SECONDS - start)) "$out" \
  "rank 0 (on $MIXRT_HOST_A_NAME) waited 3.0 s for the 2 ranks of the job to join"

# Rank 1 on host B is killed: mpirun names it.
start=$SECONDS
out=$(HOSTS_TIMEOUT=120 hosts_mpirun "$fault_worker" kill 2>&1)
rc=$?
expect "rank killed" "$rc" $((SECONDS - start)) "$out" "rank 1"

exit $fail
