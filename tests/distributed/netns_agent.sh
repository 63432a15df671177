#!/usr/bin/env bash
# Open MPI's launch agent (plm_rsh_agent) for the two hosts of
# netns_hosts.sh: called as `netns_agent.sh HOST COMMAND...` where ssh would
# be, it runs COMMAND (Open MPI's orted) inside HOST's network namespace,
# under that host's own name (a UTS namespace), as ssh would on a real
# second machine.
set -euo pipefail
host=$1
shift
case "$host" in
  "$MIXRT_HOST_A_ADDR") ns=$MIXRT_HOST_A_NS name=$MIXRT_HOST_A_NAME cpus=${MIXRT_HOST_A_CPUS:-} ;;
  "$MIXRT_HOST_B_ADDR") ns=$MIXRT_HOST_B_NS name=$MIXRT_HOST_B_NAME cpus=${MIXRT_HOST_B_CPUS:-} ;;
  *)
    echo "netns_agent: unknown host '$host'" >&2
    exit 1
    ;;
esac
# ssh hands its arguments to a shell as one command line; so does this.
# The host's cores (netns_hosts.sh): its daemon and ranks inherit them.
exec ip netns exec "$ns" unshare --uts \
  taskset -c "${cpus:-0-$(($(nproc --all) - 1))}" sh -c "hostname '$name' && $*"
