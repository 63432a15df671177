#!/usr/bin/env bash
# Two hosts on one machine, for tests and benchmarks of training across
# hosts (docs/distributed.md, "Two hosts on one machine"): two network
# namespaces, each with its own address and host name, joined by a veth
# pair and nothing else, the link shaped to a rate (tc); Open MPI launches
# one rank per host over TCP, entering host B's namespace through
# netns_agent.sh where ssh would log in. Only the namespaces and the link
# this creates are touched, and they are removed on exit.
#
# Sourced:  source netns_hosts.sh
#           hosts_up [RATE]        # e.g. 10gbit (the default), 1gbit, none
#           hosts_mpirun [MPIRUN OPTIONS] BINARY ARGS...  # 1 rank per host,
#                                  # killed after $HOSTS_TIMEOUT s (300)
#           hosts_link down|up     # host A's end of the link
#           hosts_kill_all         # every process on both hosts
#           hosts_down             # also run at exit
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN): hosts_available says why not.
# MIXRT_HOST_A_CPUS / MIXRT_HOST_B_CPUS (taskset lists, e.g. 2,3): the
# cores each host's processes run on, for a machine with enough cores to
# give each emulated host its own (unset: every core, shared).

MIXRT_HOST_A_ADDR=10.231.0.1
MIXRT_HOST_B_ADDR=10.231.0.2
MIXRT_HOST_A_NAME=mixrt-host-a
MIXRT_HOST_B_NAME=mixrt-host-b
HOSTS_SUBNET=10.231.0.0/24
HOSTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Empty when two hosts can be made here; else why not.
hosts_available() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root (network namespaces need CAP_NET_ADMIN)"
    return
  fi
  for tool in ip unshare mpirun taskset; do
    command -v "$tool" >/dev/null || {
      echo "$tool is not installed"
      return
    }
  done
  local probe=mixrtprobe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "ip netns add failed (no CAP_SYS_ADMIN, or /run/netns is read-only)"
    return
  fi
  if ! ip -n "$probe" link add mxp$$ type veth peer name mxq$$ 2>/dev/null; then
    echo "ip link add type veth failed (no veth in this kernel)"
  fi
  ip netns del "$probe"
}

# Removes what runs that died without hosts_down left (SIGKILL, an
# out-of-memory kill): their namespaces carry the pid of the shell that
# made them (mixrt<pid>a, mixrt<pid>b, mixrtprobe<pid>); one whose pid is
# no longer a process is killed empty and deleted, its veth with it. A pid
# that lives again as another process keeps its namespaces: never guess.
hosts_reap_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^mixrt(probe)?([0-9]+)[ab]?$ ]] || continue
    pid=${BASH_REMATCH[2]}
    [ "$pid" = "$$" ] && continue
    [ -d "/proc/$pid" ] && continue
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

hosts_up() {
  local rate=${1:-10gbit}
  local id=$$
  hosts_reap_stale
  MIXRT_HOST_A_NS=mixrt${id}a
  MIXRT_HOST_B_NS=mixrt${id}b
  HOSTS_DEV_A=mxa$id
  HOSTS_DEV_B=mxb$id
  export MIXRT_HOST_A_ADDR MIXRT_HOST_B_ADDR MIXRT_HOST_A_NAME \
    MIXRT_HOST_B_NAME MIXRT_HOST_A_NS MIXRT_HOST_B_NS
  export MIXRT_HOST_A_CPUS=${MIXRT_HOST_A_CPUS:-} MIXRT_HOST_B_CPUS=${MIXRT_HOST_B_CPUS:-}
  trap hosts_down EXIT
  ip netns add "$MIXRT_HOST_A_NS"
  ip netns add "$MIXRT_HOST_B_NS"
  ip link add "$HOSTS_DEV_A" netns "$MIXRT_HOST_A_NS" type veth \
    peer name "$HOSTS_DEV_B" netns "$MIXRT_HOST_B_NS"
  ip -n "$MIXRT_HOST_A_NS" addr add "$MIXRT_HOST_A_ADDR/24" dev "$HOSTS_DEV_A"
  ip -n "$MIXRT_HOST_B_NS" addr add "$MIXRT_HOST_B_ADDR/24" dev "$HOSTS_DEV_B"
  HOSTS_SHAPER=none  # hosts_shape says which shaper it used.
  for end in "$MIXRT_HOST_A_NS:$HOSTS_DEV_A" "$MIXRT_HOST_B_NS:$HOSTS_DEV_B"; do
    ip -n "${end%%:*}" link set lo up
    ip -n "${end%%:*}" link set "${end#*:}" up
    [ "$rate" = none ] || hosts_shape "${end%%:*}" "${end#*:}" "$rate"
  done
  HOSTS_SHAPING="rate $rate"
}

# Each end sends at most RATE: netem with a 100 us delay where the kernel
# has it, else a token bucket (tbf; no delay: this machine's kernel has no
# netem).
hosts_shape() {
  local ns=$1 dev=$2 rate=$3
  if ip netns exec "$ns" tc qdisc add dev "$dev" root netem delay 100us \
    rate "$rate" 2>/dev/null; then
    HOSTS_SHAPER="netem, 100 us each way"
  else
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" \
      burst 1mb latency 50ms
    HOSTS_SHAPER="tbf (no netem in this kernel: no added delay)"
  fi
}

hosts_link() {
  ip -n "$MIXRT_HOST_A_NS" link set "$HOSTS_DEV_A" "$1"
}

# Kills every process on the two hosts (a job whose link went down cannot
# be torn down by mpirun: its daemon on the far host is unreachable).
hosts_kill_all() {
  local ns
  for ns in "$MIXRT_HOST_A_NS" "$MIXRT_HOST_B_NS"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
}

hosts_down() {
  [ -n "${MIXRT_HOST_A_NS:-}" ] || return 0
  hosts_kill_all
  ip netns del "$MIXRT_HOST_A_NS" 2>/dev/null || true
  ip netns del "$MIXRT_HOST_B_NS" 2>/dev/null || true
  rm -rf "${HOSTS_SESSION:-/nonexistent}"
  MIXRT_HOST_A_NS=
}

# mpirun on host A, one rank per host over TCP on the veth only.
hosts_mpirun() {
  HOSTS_SESSION=$(mktemp -d /tmp/mixrt-hosts.XXXXXX)
  # As mpirun_test.sh: under ASan, Open MPI's own allocations at start are
  # never freed (leaks not checked; memory errors are).
  export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}detect_leaks=0"
  local forward=()
  for name in MIXRT_DIST_TIMEOUT_S MIXRT_CPU_SKIP_PROBE MIXRT_NUM_THREADS \
              LSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS TEST_TMPDIR \
              RUNFILES_DIR TEST_SRCDIR; do
    if [ -n "${!name+x}" ]; then forward+=(-x "$name"); fi
  done
  timeout "${HOSTS_TIMEOUT:-300}" ip netns exec "$MIXRT_HOST_A_NS" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "$MIXRT_HOST_A_NAME" \
    taskset -c "${MIXRT_HOST_A_CPUS:-0-$(($(nproc --all) - 1))}" \
    mpirun --allow-run-as-root \
    --host "$MIXRT_HOST_A_ADDR:1,$MIXRT_HOST_B_ADDR:1" -np 2 \
    --mca plm_rsh_agent "$HOSTS_DIR/netns_agent.sh" \
    --mca btl tcp,self \
    --mca btl_tcp_if_include "$HOSTS_SUBNET" \
    --mca oob_tcp_if_include "$HOSTS_SUBNET" \
    --mca orte_tmpdir_base "$HOSTS_SESSION" \
    "${forward[@]}" "$@"
}
