#include "core/plugin/isolation/shared_channel.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace mixrt::isolation {
namespace {

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word is shared with another process.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                 timeout, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

absl::StatusOr<int> CreateSharedMemory(const char* name, uint64_t bytes) {
  const int fd = static_cast<int>(syscall(SYS_memfd_create, name, MFD_CLOEXEC));
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("memfd_create(", name, "): ", strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("sizing shared memory ", name, " to ", bytes,
                     " bytes: ", strerror(err)));
  }
  return fd;
}

absl::StatusOr<void*> MapShared(int fd, uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "mapping ", bytes, " bytes of shared memory: ", strerror(errno)));
  }
  return p;
}

void Publish(ChannelBlock* block, ChannelState state) {
  block->state.store(state, std::memory_order_release);
  Futex(&block->state, FUTEX_WAKE, 1, nullptr);
}

uint32_t WaitForChange(ChannelBlock* block, uint32_t current,
                       absl::Duration spin, absl::Duration slice,
                       bool yield_while_spinning) {
  const absl::Time spin_end = absl::Now() + spin;
  uint32_t state = block->state.load(std::memory_order_acquire);
  for (int i = 0; state == current; ++i) {
    if ((i & 63) == 0 && absl::Now() >= spin_end) break;
    if (yield_while_spinning && (i & 15) == 15) {
      sched_yield();
    } else {
      CpuRelax();
    }
    state = block->state.load(std::memory_order_acquire);
  }
  if (state != current) return state;
  const timespec timeout = absl::ToTimespec(slice);
  Futex(&block->state, FUTEX_WAIT, current, &timeout);
  return block->state.load(std::memory_order_acquire);
}

bool MessageWriter::PutBytes(const void* data, size_t bytes) {
  if (overflowed_ || bytes > kPayloadBytes - size_) {
    overflowed_ = true;
    return false;
  }
  if (bytes > 0) std::memcpy(payload_ + size_, data, bytes);
  size_ += bytes;
  return true;
}

bool MessageWriter::PutString(absl::string_view text) {
  if (text.size() > kMaxString) text = text.substr(0, kMaxString);
  const uint32_t length = static_cast<uint32_t>(text.size());
  return Put(length) && PutBytes(text.data(), text.size());
}

std::string TakeAnswer(const ChannelBlock& block, uint64_t sequence,
                       std::vector<unsigned char>* copy, size_t* read_from,
                       uint32_t* code, std::string* message) {
  // Read once each: the other side's threads may change the block.
  const uint64_t answered = block.response_sequence;
  const uint32_t bytes = block.response_bytes;
  if (answered != sequence) {
    return absl::StrCat("answer to request ", answered, " where request ",
                        sequence, " was asked");
  }
  if (bytes > kPayloadBytes) {
    return absl::StrCat("an answer of ", bytes,
                        " bytes, more than the channel's ", kPayloadBytes);
  }
  copy->assign(block.payload, block.payload + bytes);
  MessageReader reader(copy->data(), copy->size());
  if (!reader.Get(code) || !reader.GetString(message)) {
    return "no status in the answer";
  }
  *read_from = copy->size() - reader.remaining();
  return "";
}

bool MessageReader::GetBytes(void* data, size_t bytes) {
  if (bytes == 0) return true;  // `data` may be an empty vector's NULL.
  if (bytes > size_ - offset_) return false;
  std::memcpy(data, payload_ + offset_, bytes);
  offset_ += bytes;
  return true;
}

bool MessageReader::GetString(std::string* text) {
  uint32_t length = 0;
  if (!Get(&length) || length > MessageWriter::kMaxString ||
      length > size_ - offset_) {
    return false;
  }
  text->assign(reinterpret_cast<const char*>(payload_ + offset_), length);
  offset_ += length;
  return true;
}

bool MessageReader::View(const unsigned char** data, size_t bytes) {
  if (bytes > size_ - offset_) return false;
  *data = payload_ + offset_;
  offset_ += bytes;
  return true;
}

}  // namespace mixrt::isolation
