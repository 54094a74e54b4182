// Cooperative cancellation of long kernels (Ctrl-C).
//
// The core has no Python: a process-wide flag is raised asynchronously (the bindings'
// SIGINT handler sets it while a kernel runs without the GIL) and long loops poll it
// between chunks of work with poll_interrupt(), which throws Interrupted. Polling is one
// relaxed atomic load, so a loop can afford it every few thousand steps.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>

namespace rpfast {

// Thrown by poll_interrupt() once an interrupt was requested.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

inline std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

// For tests of the polling itself: the flag is raised after this many further polls
// (<= 0: never). Lets a test check that every kernel polls without a multi-second input.
inline std::atomic<int64_t>& interrupt_countdown() {
  static std::atomic<int64_t> polls{0};
  return polls;
}

inline void request_interrupt() { interrupt_flag().store(true, std::memory_order_relaxed); }
inline void clear_interrupt() { interrupt_flag().store(false, std::memory_order_relaxed); }

inline bool interrupt_requested() {
  if (interrupt_countdown().load(std::memory_order_relaxed) > 0 &&
      interrupt_countdown().fetch_sub(1, std::memory_order_relaxed) == 1)
    request_interrupt();
  return interrupt_flag().load(std::memory_order_relaxed);
}

inline void poll_interrupt() {
  if (interrupt_requested()) throw Interrupted();
}

// Polls every `Period` calls of tick() (a power of two), for tight search loops.
template <uint32_t Period = 4096>
class InterruptPoller {
 public:
  void tick() {
    if ((++count_ & (Period - 1)) == 0) poll_interrupt();
  }

 private:
  uint32_t count_ = 0;
};

}  // namespace rpfast
