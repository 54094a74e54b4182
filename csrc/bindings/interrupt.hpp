// Running kernels without the GIL while keeping Ctrl-C working.
//
// While any kernel runs, SIGINT goes to a handler that raises rpfast's interrupt flag
// (which long kernels poll, throwing rpfast::Interrupted) and then calls the handler it
// replaced (Python's), so the interpreter still sees the signal. run_kernel turns
// Interrupted into KeyboardInterrupt (or whatever Python's SIGINT handler raises).
#pragma once
#include <pybind11/pybind11.h>

#include <csignal>
#include <mutex>
#include <optional>
#include <type_traits>

#include "rpfast/interrupt.hpp"

namespace rpfast_bindings {
namespace py = pybind11;

class SigintScope {
 public:
  SigintScope() {
    std::lock_guard<std::mutex> lock(mutex());
    if (depth()++ > 0) return;
    rpfast::clear_interrupt();
    struct sigaction current {};
    if (sigaction(SIGINT, nullptr, &current) != 0) return;
    const bool handled = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler != SIG_IGN &&
                         current.sa_handler != SIG_DFL;
    if (!handled) return;  // nobody listens (ignored) or the default kills the process anyway
    previous() = current;
    struct sigaction ours {};
    ours.sa_handler = &on_sigint;
    sigemptyset(&ours.sa_mask);
    installed() = sigaction(SIGINT, &ours, nullptr) == 0;
  }
  ~SigintScope() {
    std::lock_guard<std::mutex> lock(mutex());
    if (--depth() > 0 || !installed()) return;
    sigaction(SIGINT, &previous(), nullptr);
    installed() = false;
  }
  SigintScope(const SigintScope&) = delete;
  SigintScope& operator=(const SigintScope&) = delete;

 private:
  static void on_sigint(int sig) {
    rpfast::request_interrupt();
    previous().sa_handler(sig);
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static int& depth() {
    static int d = 0;
    return d;
  }
  static bool& installed() {
    static bool i = false;
    return i;
  }
  static struct sigaction& previous() {
    static struct sigaction p {};
    return p;
  }
};

// Runs kernel() with the GIL released and returns what it returns; Ctrl-C during it raises
// KeyboardInterrupt here. Call with the GIL held. Every binding runs its kernel through this
// (never a bare gil_scoped_release), so every kernel honours Ctrl-C the same way.
template <class Kernel>
auto run_kernel(Kernel&& kernel) -> decltype(kernel()) {
  using Result = decltype(kernel());
  bool interrupted = false;
  std::conditional_t<std::is_void_v<Result>, char, std::optional<Result>> result{};
  {
    SigintScope scope;
    // A Ctrl-C that came before the scope was installed (while Python ran C code, so no
    // KeyboardInterrupt was raised yet) is pending in the interpreter: honour it now, or a
    // long kernel would run to the end.
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    py::gil_scoped_release release;
    try {
      if constexpr (std::is_void_v<Result>)
        kernel();
      else
        result.emplace(kernel());
    } catch (const rpfast::Interrupted&) {
      interrupted = true;
    }
  }
  if (interrupted) {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Python's handler raised
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if constexpr (!std::is_void_v<Result>) return std::move(*result);
}

}  // namespace rpfast_bindings
