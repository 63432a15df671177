# Sourced by the device kits (scripts/gpu_kit.sh, scripts/host_kit.sh): a
# kit carries every shared library its programs load that a lent machine
# does not have, found with ldd, and is checked as that machine will see it.
#
# What a lent machine has without us: glibc (its loader, libc, libm,
# libmvec, libdl, librt, libpthread), the NVIDIA driver (libcuda) and the
# CUDA toolkit under /usr/local/cuda (cuBLASLt alone is ~500 MiB).

kit_is_elf() { [ "$(od -An -c -N4 "$1" | tr -d " ")" = "177ELF" ]; }

kit_system_lib() {
  case "$(basename "$1")" in
    ld-linux*.so* | libc.so* | libm.so* | libmvec.so* | libdl.so* | librt.so* | \
      libpthread.so* | libresolv.so* | libcuda.so* | libnvidia*) return 0 ;;
  esac
  case "$1" in /usr/local/cuda*) return 0 ;; esac
  return 1
}

# kit_bundle_libs LIBDIR FILE...: copies the libraries each ELF FILE loads
# (and that the lent machine lacks) into LIBDIR.
kit_bundle_libs() {
  local libdir=$1 f lib
  shift
  mkdir -p "$libdir"
  for f in "$@"; do
    kit_is_elf "$f" || continue
    while read -r lib; do
      [ -n "$lib" ] && ! kit_system_lib "$lib" && [ ! -e "$libdir/$(basename "$lib")" ] &&
        cp -L "$lib" "$libdir/"
    done < <(ldd "$f" | awk '/=> \// {print $3}')
  done
  chmod 644 "$libdir"/*
}

# kit_check_scrubbed LIBDIR FILE...: in a scrubbed environment, every
# library each ELF FILE loads resolves from LIBDIR or from the lent
# machine's own set; says which does not and fails.
kit_check_scrubbed() {
  local libdir=$1 f name arrow path rest
  shift
  for f in "$@"; do
    kit_is_elf "$f" || continue
    while read -r name arrow path rest; do
      if [ "$path" = "not" ]; then
        echo "kit: $(basename "$f") needs $name, found nowhere" >&2
        return 1
      fi
      case "$path" in
        "$libdir"/*) ;;
        *) kit_system_lib "$path" || {
          echo "kit: $(basename "$f") loads $path from outside the kit" >&2
          return 1
        } ;;
      esac
    done < <(env -i LD_LIBRARY_PATH="$libdir" ldd "$f" | awk '/=>/ {print $1, $2, $3}')
  done
}

# kit_pack KIT: KIT compressed into KIT's parent/KIT_pack/KIT.tar.gz (a
# working tree and a kit together exceed what a device run carries, 64 MiB;
# the kit compressed does not).
kit_pack() {
  local kit=$1 name pack
  name=$(basename "$kit")
  pack="$(dirname "$kit")/${name}_pack"
  mkdir -p "$pack"
  tar -C "$(dirname "$kit")" -czf "$pack/$name.tar.gz" "$name"
  echo "$name: $pack/$name.tar.gz: $(du -m "$pack/$name.tar.gz" | cut -f1) MiB"
}
