#!/usr/bin/env bash
# A netns_hosts.sh run killed with SIGKILL leaves its two namespaces, the
# veth between them and the processes on them; the next run's hosts_up
# removes them (their names carry a pid that is gone), and leaves alone
# those of a run still alive.
#   netns_reap_test.sh NETNS_HOSTS
set -uo pipefail
source "$1"
why=$(hosts_available)
if [ -n "$why" ]; then
  echo "SKIPPED: namespaces cannot be made here: $why"
  exit 0
fi
fail=0
# A run that died: a pid that was a process and is not any more.
sleep 0 &
dead=$!
wait "$dead"
ip netns add "mixrt${dead}a"
ip netns add "mixrt${dead}b"
ip link add "mxa$dead" netns "mixrt${dead}a" type veth peer name "mxb$dead" \
  netns "mixrt${dead}b"
ip netns exec "mixrt${dead}b" sleep 300 &
leftover=$!
disown "$leftover"  # Its death is the point: no job-control notice.
# A run still alive (this test's own parent shell stands for it).
alive=$PPID
ip netns add "mixrt${alive}a"
sleep 0.5

hosts_reap_stale

for ns in "mixrt${dead}a" "mixrt${dead}b"; do
  if ip netns list | grep -qw "$ns"; then
    echo "FAIL: $ns of a dead run is still there"
    fail=1
  fi
done
if kill -0 "$leftover" 2>/dev/null; then
  echo "FAIL: the process left on the dead run's host B still runs"
  fail=1
  kill -9 "$leftover" 2>/dev/null
fi
if ! ip netns list | grep -qw "mixrt${alive}a"; then
  echo "FAIL: the namespace of a live run was removed"
  fail=1
fi
ip netns del "mixrt${alive}a" 2>/dev/null
[ "$fail" = 0 ] && echo "PASS: a dead run's namespaces, veth and processes are removed"
exit "$fail"
