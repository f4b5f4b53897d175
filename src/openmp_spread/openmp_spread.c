/*
 * sparsetir_openmp_spread: moves apart the threads of the calling thread's OpenMP team (torch's
 * operators run on it) that are runnable on one CPU, without binding them and without waking
 * them (see sparsetir/runtime/threads.py, spread_team).
 *
 * The team's thread ids are learnt once per calling thread, by one OpenMP region in which each
 * thread of the team gives its id (libgomp keeps a team's threads for its later regions). A
 * spread then reads where each of them is from /proc/self/task/<tid>/stat and moves a runnable
 * one that shares a CPU with another of the team by setting its affinity from the calling
 * thread: it never opens a region, so it never waits for a thread the OS has parked or
 * descheduled (a region did, and on a loaded 2-core VM that cost 44 ms a spread). A sleeping
 * thread is left where it is: the scheduler places it when it wakes. In a child made by fork(),
 * on the thread that forked (whose copy of the OpenMP pool has no threads behind it), a spread
 * does nothing.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { MAX_TEAM = 256, STAT_CPU_FIELD = 39 };

static __thread int forked_here;          /* this thread called fork() and is the child's thread */
static __thread pid_t team_tids[MAX_TEAM]; /* this thread's team, learnt by learn_team */
static __thread int team_known;            /* how many of them */
static __thread int team_asked;            /* for which team size; 0: not learnt (or lost) */
static long regions_opened;                /* by learn_team, ever (for tests) */

static void after_fork_in_child(void) {
  forked_here = 1;
  team_asked = 0;
}

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

/* Learn the ids of the `size` threads of the calling thread's team (one OpenMP region). */
static void learn_team(int size) {
  pid_t found[MAX_TEAM];
  int got = 0;
  __atomic_add_fetch(&regions_opened, 1, __ATOMIC_RELAXED);
#pragma omp parallel num_threads(size)
  {
    found[omp_get_thread_num()] = (pid_t)syscall(SYS_gettid);
#pragma omp single
    got = omp_get_num_threads();
  }
  memcpy(team_tids, found, sizeof(pid_t) * (size_t)got);
  team_known = got;
  team_asked = size;
}

/* The CPU thread `tid` of this process is on when it is runnable (state R), -1 when it sleeps
 * or its CPU cannot be read, -2 when the thread is gone. */
static int runnable_cpu(pid_t tid) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -2;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -2;
  text[n] = '\0';
  char *field = strrchr(text, ')'); /* the name may hold spaces and parentheses */
  if (field == NULL || field[1] != ' ') return -1;
  field += 2;                       /* field 3: the state */
  if (*field != 'R') return -1;
  for (int k = 3; k < STAT_CPU_FIELD; ++k) {
    field = strchr(field, ' ');
    if (field == NULL) return -1;
    field += 1;
  }
  return atoi(field);
}

/* Move the runnable threads of the team torch's next operator would run on
 * (omp_get_max_threads()) apart (see sparsetir_openmp_plan_spread): a thread to move has its
 * affinity narrowed to the planned CPU, which migrates it there, and restored at once, so it
 * stays free to move later. A thread bound to one CPU, or not allowed on the planned one,
 * stays. Returns the threads moved. */
int sparsetir_openmp_spread(void) {
  int team_size = omp_get_max_threads();
  if (team_size <= 1 || forked_here || omp_in_parallel()) return 0;
  if (team_size > MAX_TEAM) team_size = MAX_TEAM;
  cpu_set_t usable;
  if (sched_getaffinity(0, sizeof usable, &usable) != 0 || CPU_COUNT(&usable) < 2) return 0;
  int allowed[CPU_SETSIZE], n_allowed = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &usable)) allowed[n_allowed++] = cpu;
  }
  if (team_asked != team_size) learn_team(team_size);
  int size = team_known, cpus[MAX_TEAM], target[MAX_TEAM];
  cpus[0] = sched_getcpu(); /* thread 0 is the caller */
  for (int i = 1; i < size; ++i) {
    cpus[i] = runnable_cpu(team_tids[i]);
    if (cpus[i] == -2) { /* the team changed: learn it again at the next spread */
      team_asked = 0;
      return 0;
    }
  }
  sparsetir_openmp_plan_spread(size, cpus, n_allowed, allowed, target);
  int moved = 0;
  for (int i = 1; i < size; ++i) {
    cpu_set_t own, only;
    if (target[i] < 0 || sched_getaffinity(team_tids[i], sizeof own, &own) != 0 ||
        CPU_COUNT(&own) <= 1 || !CPU_ISSET(target[i], &own)) {
      continue;
    }
    CPU_ZERO(&only);
    CPU_SET(target[i], &only);
    if (sched_setaffinity(team_tids[i], sizeof only, &only) == 0) {
      moved += 1;
      sched_setaffinity(team_tids[i], sizeof own, &own);
    }
  }
  return moved;
}

/* How many OpenMP regions spreads have opened in this process (one per calling thread and team
 * size, to learn the team). */
long sparsetir_openmp_spread_regions(void) {
  return __atomic_load_n(&regions_opened, __ATOMIC_RELAXED);
}
