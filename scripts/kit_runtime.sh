# Sourced by a device kit's runner on the lent machine (scripts/gpu_kit/
# run.sh, scripts/host_kit/run.sh):
#   kit_private_copy KIT NAME [FOLDER...]  copies KIT's bin/ and lib/ (and
#       the FOLDERs) to a folder only this user can write and prints it;
#   kit_steps_begin OUT PREFIX; kit_step NAME SECONDS COMMAND...  runs each
#       step under its limit, its output to OUT/NAME.log, one line per step
#       in OUT/steps.jsonl.
#
# Plugins found by searching must sit where only this user or root can
# write (the loader's trust rule); a kit may have landed anywhere, so it
# runs from a private copy.
kit_private_copy() {
  local kit=$1 name=$2
  shift 2
  local home="${MIXRT_KIT_HOME:-${HOME:-/root}/.cache/$name}" dir runtime lib version
  mkdir -p "$home" && chmod 700 "$home"
  for dir in bin lib "$@"; do
    rm -rf "${home:?}/$dir"
    cp -R "$kit/$dir" "$home/"
  done
  chmod -R go-w "$home"
  # The C++ runtime is bundled for images without one; where the machine
  # has one at least as new as ours (a newer CUDA library, or PyTorch, may
  # need newer symbols), the machine's is used.
  for runtime in libstdc++.so.6:GLIBCXX_3.4.30 libgcc_s.so.1:GCC_12.0.0; do
    lib=${runtime%%:*} version=${runtime#*:}
    for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64; do
      if [ -e "$dir/$lib" ] && grep -qa "$version" "$dir/$lib"; then
        rm -f "$home/lib/$lib"
        break
      fi
    done
  done
  echo "$home"
}

kit_steps_begin() {
  KIT_OUT=$1 KIT_PREFIX=$2
  : >"$KIT_OUT/steps.jsonl"
}

kit_step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc=0
  echo "$KIT_PREFIX: $name ..."
  # Appended to (O_APPEND), as every writer of it must: a program that
  # opens /dev/stderr anew (tee) then writes at the end, not over the log.
  : >"$KIT_OUT/$name.log"
  timeout "$limit" "$@" >>"$KIT_OUT/$name.log" 2>&1 || rc=$?
  printf '{"step": "%s", "rc": %d, "seconds": %d, "limit": %d}\n' \
    "$name" "$rc" $((SECONDS - start)) "$limit" >>"$KIT_OUT/steps.jsonl"
  echo "$KIT_PREFIX: $name: exit $rc in $((SECONDS - start)) s"
}
