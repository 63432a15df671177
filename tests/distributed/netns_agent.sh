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
  "$MIXRT_HOST_A_ADDR") ns=$MIXRT_HOST_A_NS name=$MIXRT_HOST_A_NAME ;;
  "$MIXRT_HOST_B_ADDR") ns=$MIXRT_HOST_B_NS name=$MIXRT_HOST_B_NAME ;;
  *)
    echo "netns_agent: unknown host '$host'" >&2
    exit 1
    ;;
esac
# ssh hands its arguments to a shell as one command line; so does this.
exec ip netns exec "$ns" unshare --uts sh -c "hostname '$name' && $*"
