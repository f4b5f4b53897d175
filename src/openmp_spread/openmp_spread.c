/*
 * sparsetir_openmp_spread: moves apart the threads of the calling thread's OpenMP team (torch's
 * operators run on it) that share a CPU, without binding them (see
 * sparsetir/runtime/threads.py, spread_team).
 *
 * sparsetir_openmp_spread moves threads of the calling thread's team that share a CPU with
 * another of the team to CPUs none of it is on, and leaves them unbound. In a child made by
 * fork(), on the thread that forked (whose copy of the OpenMP pool has no threads behind it),
 * it does nothing.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <sched.h>

static __thread int forked_here; /* this thread called fork() and is the child's thread */

static void after_fork_in_child(void) { forked_here = 1; }

__attribute__((constructor)) static void arm_fork_handler(void) {
  pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* Plan a spread: for a team whose thread i runs on cpus[i], target[i] is the CPU thread i
 * should move to, or -1 to stay. A thread on the same CPU as an earlier one gets the first CPU
 * of `allowed` (n_allowed of them) that no thread of the team is on or moving to, while one is
 * left. Thread 0, the caller, never moves, nor does a thread whose CPU is unknown (-1). */
void sparsetir_openmp_plan_spread(int size, const int *cpus, int n_allowed, const int *allowed,
                                  int *target) {
  for (int i = 0; i < size; ++i) target[i] = -1;
  for (int i = 0; i < size; ++i) {
    int crowded = 0;
    for (int j = 0; j < i && cpus[i] >= 0; ++j) crowded |= cpus[j] == cpus[i];
    for (int k = 0; crowded && target[i] < 0 && k < n_allowed; ++k) {
      int taken = 0;
      for (int j = 0; j < size; ++j) taken |= cpus[j] == allowed[k] || target[j] == allowed[k];
      if (!taken) target[i] = allowed[k];
    }
  }
}

/* Move the threads of the team torch's next operator would run on (omp_get_max_threads()) apart (see sparsetir_openmp_plan_spread): a thread
 * to move narrows its affinity to the planned CPU, which migrates it there, and restores its
 * own affinity at once, so it stays free to move later. A thread bound to one CPU, or not
 * allowed on the planned one, stays. Returns the threads moved. */
int sparsetir_openmp_spread(void) {
  int team_size = omp_get_max_threads();
  if (team_size <= 1 || forked_here || omp_in_parallel()) return 0;
  cpu_set_t usable;
  if (sched_getaffinity(0, sizeof usable, &usable) != 0 || CPU_COUNT(&usable) < 2) return 0;
  int allowed[CPU_SETSIZE], n_allowed = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &usable)) allowed[n_allowed++] = cpu;
  }
  int cpus[team_size], target[team_size];
  int moved = 0;
#pragma omp parallel num_threads(team_size) reduction(+ : moved)
  {
    int me = omp_get_thread_num();
    cpus[me] = sched_getcpu();
#pragma omp barrier
#pragma omp single
    sparsetir_openmp_plan_spread(omp_get_num_threads(), cpus, n_allowed, allowed, target);
    cpu_set_t own, only;
    if (target[me] >= 0 && sched_getaffinity(0, sizeof own, &own) == 0 &&
        CPU_COUNT(&own) > 1 && CPU_ISSET(target[me], &own)) {
      CPU_ZERO(&only);
      CPU_SET(target[me], &only);
      if (sched_setaffinity(0, sizeof only, &only) == 0) {
        moved += 1;
        sched_setaffinity(0, sizeof own, &own);
      }
    }
  }
  return moved;
}
