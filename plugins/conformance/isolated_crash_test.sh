#!/usr/bin/env bash
# A plugin that crashes mid-suite, run with --isolate: the suite survives
# it, fails the cases from there on with the reason, and prints its table.
#   isolated_crash_test.sh CONFORMANCE PLUGIN REFERENCE PLUGIN_HOST
set -uo pipefail
conformance=$1 plugin=$2 reference=$3 host=$4
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
out=$(MIXRT_PLUGIN_HOST=$(abs "$host") MIXRT_FAULTY_MODE=crash \
  MIXRT_FAULTY_OP=softmax timeout 300 "$conformance" \
  --plugin="$(abs "$plugin")" --reference="$(abs "$reference")" --isolate 2>&1)
status=$?
fail() { echo "FAIL: $1"; tail -40 <<<"$out"; exit 1; }
[ "$status" = 1 ] || fail "exit status $status, expected 1 (cases failed)"
grep -q "crashed: SIGSEGV in softmax" <<<"$out" ||
  fail "no 'crashed: SIGSEGV in softmax' in the output"
grep -Eq "^total: [0-9]+ ok, [1-9][0-9]* failed" <<<"$out" ||
  fail "no table with failures at the end"
echo "PASS: $(grep '^total:' <<<"$out")"
