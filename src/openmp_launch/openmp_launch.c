/*
 * sparsetir_openmp_launch: TVM's parallel-launch entry point run on OpenMP threads (see
 * sparsetir/runtime/threads.py).
 *
 * A compiled TVM kernel runs a parallel loop by calling the function its module's
 * __TVMBackendParallelLaunch points to, with a lambda that does the share of task `task_id`
 * out of `penv->num_task`; TVM's runtime points it at its own thread pool. threads.py points
 * it here instead (TVMFFIEnvModRegisterContextSymbol), so the lambda runs as one OpenMP
 * parallel region: on the OpenMP runtime the process already has (torch's libgomp), whose
 * threads are the ones torch's operators use, so kernels and torch never keep two pools of
 * busy threads on the same cores. __TVMBackendParallelBarrier becomes an OpenMP barrier.
 *
 * A launch uses `num_task` threads when the kernel asks for a number, else the count given to
 * sparsetir_openmp_setup; it runs the whole loop on the calling thread (one task) inside an
 * OpenMP parallel region, on the thread that called fork() in the child, whose copy of
 * the OpenMP pool has no threads behind it, and while the calling thread has asked for serial
 * launches (sparsetir_openmp_serial: a call too small to gain from a team, as torch runs a
 * range under its grain size). An error a task raises (the lambda returns
 * nonzero with the error in its thread's tvm-ffi slot) is moved to the calling thread's slot,
 * the first one when several fail, and the launch returns -1, as TVM's pool does.
 *
 * sparsetir_openmp_spread moves threads of the calling thread's team that share a CPU with
 * another of the team to CPUs none of it is on, and leaves them unbound (threads.py says why).
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  void *sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv; /* tvm/runtime/c_backend_api.h */

typedef int (*parallel_lambda)(int task_id, TVMParallelGroupEnv *penv, void *cdata);
typedef void (*move_error_fn)(void **error);
typedef void (*set_error_fn)(void *error);
typedef int (*dec_ref_fn)(void *object);

static move_error_fn ffi_move_error; /* TVMFFIErrorMoveFromRaised */
static set_error_fn ffi_set_error;   /* TVMFFIErrorSetRaised (takes a reference of its own) */
static dec_ref_fn ffi_dec_ref;       /* TVMFFIObjectDecRef */
static int team_size = 1;
static __thread int forked_here;     /* this thread called fork() and is the child's thread */
static __thread int serial_here;     /* this thread's launches run on itself */

static void after_fork_in_child(void) { forked_here = 1; }

/* Set the tvm-ffi error functions and the threads a launch uses when the kernel does not say. */
void sparsetir_openmp_setup(void *move_error, void *set_error, void *dec_ref, int threads) {
  ffi_move_error = (move_error_fn)move_error;
  ffi_set_error = (set_error_fn)set_error;
  ffi_dec_ref = (dec_ref_fn)dec_ref;
  team_size = threads > 0 ? threads : 1;
  static int armed;
  if (!armed) {
    armed = 1;
    pthread_atfork(NULL, NULL, after_fork_in_child);
  }
}

/* Run the calling thread's next launches on itself (serial nonzero) or on a team (0). */
void sparsetir_openmp_serial(int serial) { serial_here = serial; }

int sparsetir_openmp_launch(parallel_lambda lambda, void *cdata, int num_task) {
  int wanted = num_task > 0 ? num_task : team_size;
  if (wanted <= 1 || forked_here || serial_here || omp_in_parallel()) {
    TVMParallelGroupEnv env = {NULL, 1};
    return lambda(0, &env, cdata);
  }
  void *first_error = NULL;
  int failed = 0;
#pragma omp parallel num_threads(wanted)
  {
    TVMParallelGroupEnv env = {NULL, omp_get_num_threads()};
    if (lambda(omp_get_thread_num(), &env, cdata) != 0) {
      void *error = NULL;
      ffi_move_error(&error);
#pragma omp critical(sparsetir_openmp_launch_error)
      {
        failed = 1;
        if (first_error == NULL) {
          first_error = error;
        } else if (error != NULL) {
          ffi_dec_ref(error);
        }
      }
    }
  }
  if (!failed) return 0;
  if (first_error != NULL) {
    ffi_set_error(first_error);
    ffi_dec_ref(first_error);
  }
  return -1;
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

/* Move the team's threads apart (see sparsetir_openmp_plan_spread): a thread to move narrows
 * its affinity to the planned CPU, which migrates it there, and restores its own affinity at
 * once, so it stays free to move later. A thread bound to one CPU, or not allowed on the
 * planned one, stays. Returns the threads moved. */
int sparsetir_openmp_spread(void) {
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

int sparsetir_openmp_barrier(int task_id, TVMParallelGroupEnv *penv) {
  (void)task_id;
  if (penv->num_task > 1) { /* a launch run on one thread has no team to wait for */
#pragma omp barrier
  }
  return 0;
}
