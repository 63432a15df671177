// Time per kernel, summed by op and dtypes over a run: where a model's step
// goes, op by op (as torch.profiler's key_averages table). Off unless
// MIXRT_PROFILE_OPS=1 (the table goes to stderr at exit) or
// EnableOpProfile(true); each launch is timed on the host, after
// synchronizing its device, so the figures are kernel times on GPUs too.
// Compiled graphs' launches and fused kernels count as "compiled <op>" and
// "compiled fused: <kernel>" (a reduce-overhead kernel graph runs whole,
// untimed).
//
//   MIXRT_PROFILE_OPS=1 bazel-bin/examples/gpt --modes=bf16 --steps=5
#ifndef MIXRT_CORE_TENSOR_OP_PROFILE_H_
#define MIXRT_CORE_TENSOR_OP_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mixrt {

struct OpProfileEntry {
  std::string op;  // "matmul bf16 -> f32" (op, first input, output).
  int64_t calls = 0;
  double seconds = 0;  // Summed over calls (and threads).
};

// Whether launches are being timed (thread-safe).
bool OpProfileEnabled();
// Starts or stops timing; starting keeps what was recorded before.
void EnableOpProfile(bool enabled);
void ResetOpProfile();
// The entries so far, most time first.
std::vector<OpProfileEntry> OpProfileEntries();
// The entries as a table with each one's share of the total.
std::string OpProfileTable();

// Called by LaunchKernel around each launch.
void RecordOpTime(const std::string& op, double seconds);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_OP_PROFILE_H_
