#include "serialize/io/mapped_reads.h"

#include <csetjmp>
#include <csignal>
#include <mutex>
#include <string>

#include "ptepack/error.h"
#include "serialize/io/bytes_source.h"
#include "serialize/io/file_io.h"

namespace ptepack {

#if defined(__EMSCRIPTEN__)

void ReadMappedPages(const Bytes&, void (*read)(void*), void* arg) { read(arg); }

#else

namespace {

// The read in progress on this thread, if any: where to jump on SIGBUS.
thread_local sigjmp_buf* t_reading = nullptr;
struct sigaction g_previous;

// A SIGBUS during a guarded read leaves the read; any other goes to the
// handler that was there before (by default: the process dies, as it would
// without us).
void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (t_reading != nullptr) siglongjmp(*t_reading, 1);
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: die of the signal, as the fault would have.
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

// sigsetjmp's frame must stay live while read runs, so it is taken here and
// nothing between it and read() has a destructor.
bool Guarded(void (*read)(void*), void* arg) {
  sigjmp_buf env;
  sigjmp_buf* const outer = t_reading;
  if (sigsetjmp(env, 1) != 0) {  // 1: the signal mask comes back too
    t_reading = outer;
    return false;
  }
  t_reading = &env;
  read(arg);
  t_reading = outer;
  return true;
}

}  // namespace

void ReadMappedPages(const Bytes& b, void (*read)(void*), void* arg) {
  const MappedFile* m = MappingOf(b);
  if (m == nullptr) {
    read(arg);
    return;
  }
  InstallOnce();
  if (!Guarded(read, arg)) {
    throw Error("read-failed", m->path() + ": input ended early (was it truncated?)");
  }
}

#endif

}  // namespace ptepack
