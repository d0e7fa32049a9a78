// Wakes the agent's loop as soon as one of its children ends, so a job's exit reaches the daemon
// at once, not at the loop's next turn (up to 200 ms later: a sweep of short jobs spent most of
// its time there). SIGCHLD is blocked in every thread of the agent (main blocks it before any
// thread starts) and read from a signalfd by a thread of its own; reaping stays the runner's.
#pragma once

#include <functional>
#include <thread>

namespace hetpool::agent {

// Blocks SIGCHLD in the calling thread and the threads it starts after. Children started by the
// agent reset their mask (process_spawner.cc, program_run.cc).
void BlockChildSignals();

class ChildExitWatch {
 public:
  // Calls `wake` (from its own thread) each time a child of the process ends. Watches nothing
  // when SIGCHLD is not blocked (BlockChildSignals) or no signalfd can be had.
  explicit ChildExitWatch(std::function<void()> wake);
  ~ChildExitWatch();
  ChildExitWatch(const ChildExitWatch&) = delete;
  ChildExitWatch& operator=(const ChildExitWatch&) = delete;

 private:
  void Run();

  std::function<void()> wake_;
  int signals_ = -1;  // the signalfd
  int stop_ = -1;     // an eventfd: written to stop the thread
  std::thread thread_;
};

}  // namespace hetpool::agent
