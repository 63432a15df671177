// The channel between the host process and mixrt-plugin-host: one block of
// shared memory (a memfd mapped in both) holding a state word, the call, and
// a payload. The host writes a request and flips the state to kRequest; the
// plugin host answers and flips it to kResponse. Each side spins briefly and
// then sleeps on the state word with a futex: no socket, no copy through the
// kernel on the hot path.
//
// The plugin host is untrusted: it may scribble anywhere in the block, from
// any thread, at any time. Every request carries a sequence number the
// answer must repeat, so an answer is tied to its request (a state word
// flipped by a stray thread, or a late answer to an earlier call, is a
// protocol break, never a result); the host copies the answer out of the
// shared block before reading it, reads it through MessageReader, which
// checks each length against the payload's bounds, and trusts no pointer
// from it.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_SHARED_CHANNEL_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_SHARED_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mixrt::isolation {

inline constexpr uint32_t kChannelMagic = 0x6d786963;  // "mxic"
inline constexpr size_t kPayloadBytes = size_t{1} << 20;

enum ChannelState : uint32_t {
  kIdle = 0,
  kRequest = 1,
  kResponse = 2,
};

struct ChannelBlock {
  uint32_t magic;
  uint32_t version;
  // The futex word: ChannelState.
  std::atomic<uint32_t> state;
  uint32_t call;
  uint32_t request_bytes;
  uint32_t response_bytes;
  // The host numbers each request; the answer repeats the number.
  uint64_t request_sequence;
  uint64_t response_sequence;
  alignas(64) unsigned char payload[kPayloadBytes];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "the state word is shared between processes");

// A memfd of `bytes`, close-on-exec; `name` shows in /proc/PID/maps.
absl::StatusOr<int> CreateSharedMemory(const char* name, uint64_t bytes);
// Maps `bytes` of `fd` shared and read-write (MAP_NORESERVE: the arena is
// sparse; pages count when touched).
absl::StatusOr<void*> MapShared(int fd, uint64_t bytes);

// Stores `state` (release) and wakes the other side.
void Publish(ChannelBlock* block, ChannelState state);
// Waits until the state word differs from `current`, spinning for `spin`
// first (yielding the core now and then when `yield_while_spinning`), then
// sleeping at most `slice` per futex wait. Returns the new state, or
// `current` when `slice` passed without a change (the caller checks whether
// its peer is still alive, then waits again).
uint32_t WaitForChange(ChannelBlock* block, uint32_t current,
                       absl::Duration spin, absl::Duration slice,
                       bool yield_while_spinning);

// Appends plain values and strings to a payload.
class MessageWriter {
 public:
  explicit MessageWriter(unsigned char* payload) : payload_(payload) {}
  template <typename T>
  bool Put(const T& value) {
    static_assert(std::is_trivially_copyable<T>::value, "plain data only");
    return PutBytes(&value, sizeof(T));
  }
  bool PutBytes(const void* data, size_t bytes);
  // Length-prefixed; cut at kMaxString bytes.
  bool PutString(absl::string_view text);
  size_t size() const { return size_; }
  bool overflowed() const { return overflowed_; }

  static constexpr size_t kMaxString = 4096;

 private:
  unsigned char* payload_;
  size_t size_ = 0;
  bool overflowed_ = false;
};

// The answer in `block` to request `sequence`, copied into `copy` (this
// process's memory: nothing the other side writes later changes it) and
// past its status: `code` and `message`. "" when it is that; else why the
// answer is no answer to the request (the caller breaks the channel): out
// of sequence, longer than the payload, or without a status.
std::string TakeAnswer(const ChannelBlock& block, uint64_t sequence,
                       std::vector<unsigned char>* copy, size_t* read_from,
                       uint32_t* code, std::string* message);

// Reads what a MessageWriter wrote; every read is bounds-checked against the
// `size` the writer claimed (itself capped at the payload's size).
class MessageReader {
 public:
  MessageReader(const unsigned char* payload, size_t size)
      : payload_(payload), size_(size > kPayloadBytes ? 0 : size) {}
  template <typename T>
  bool Get(T* value) {
    static_assert(std::is_trivially_copyable<T>::value, "plain data only");
    return GetBytes(value, sizeof(T));
  }
  bool GetBytes(void* data, size_t bytes);
  bool GetString(std::string* text);
  // A view into the payload (valid while the payload is); false past the end.
  bool View(const unsigned char** data, size_t bytes);
  size_t remaining() const { return size_ - offset_; }
  // Skips `bytes` (already read by someone else); false past the end.
  bool Skip(size_t bytes) {
    if (bytes > size_ - offset_) return false;
    offset_ += bytes;
    return true;
  }

 private:
  const unsigned char* payload_;
  size_t size_;
  size_t offset_ = 0;
};

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_SHARED_CHANNEL_H_
