/*
 * sparsetir_task_pool: TVM's parallel-launch entry point on a small pool of threads that claim
 * a loop's tasks one at a time (see sparsetir/runtime/threads.py, which registers it).
 *
 * A compiled TVM kernel runs a parallel loop by calling __TVMBackendParallelLaunch with a
 * lambda that does the share `task_id` of `penv->num_task` equal shares of the loop. Here a
 * launch cuts the loop into TASKS_PER_THREAD shares per thread, publishes them, and the
 * calling thread and the pool's workers take them from one counter until none is left. The
 * caller then waits only for shares already taken: a worker the OS has not scheduled yet (a
 * busy machine, a thread still waking) takes none and is never waited for; it finds the
 * counter exhausted when it runs. So a call never waits for a parked or descheduled thread,
 * only for a share in progress, and it is never slower than the caller alone by more than one
 * share.
 *
 * Between launches a worker waits in three steps: it spins on the counter (`pause`), then
 * calls sched_yield until yield_ns have passed (another runnable thread on its CPU, of this
 * process or another, gets the CPU), then sleeps on a futex until the next launch. It spins
 * only as long as launches have been coming: eight times the recent gap between one launch's
 * end and the next one's start (a running average), when that is under spin_ns, else
 * MIN_SPIN_NS. Back-to-back calls so find their workers awake, while calls between which the
 * caller does other work (torch's operators in a training step, on torch's own threads) do
 * not have a worker spinning beside that work; idle workers cost nothing after a few
 * milliseconds.
 *
 * The pool's size can change between launches (sparsetir_task_pool_threads: threads.py
 * follows torch.set_num_threads): workers are started up to the new size at the next launch,
 * and those numbered beyond it sleep through launches until the size grows again.
 *
 * One launch at a time uses the pool: a launch from another thread meanwhile, from inside a
 * task, from the thread that called fork() in a child (whose pool has no threads), or while
 * the calling thread has asked for serial launches (sparsetir_task_pool_mode(MODE_SERIAL)) runs
 * the whole loop on its calling thread.
 *
 * MODE_OPENMP runs a launch as one OpenMP parallel region instead, on the team of the
 * process's OpenMP runtime (torch's libgomp): for calls inside a torch program, whose operators
 * run on that team between the kernels. Its threads spin after each operator, and a kernel on a
 * pool of its own would share the cores with them (DGL's edge softmax of GAT on Pubmed: 1.4-1.7
 * ms on the pool, 0.87 on torch's team). The region's threads claim the same shares one at a
 * time from a counter, so a thread the OS deschedules leaves its shares to the others; the
 * region still ends when every thread of the team has arrived. An error a task raises (the lambda returns nonzero with the
 * error in its thread's tvm-ffi slot) is moved to the calling thread's slot, the first one
 * when several fail, and the launch returns -1, as TVM's pool does. A parallel barrier cannot
 * be kept when shares are claimed (a share may wait for one nobody runs yet): the barrier
 * raises an error instead of deadlocking; sparsetir's kernels never emit one.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <omp.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  void *sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv; /* tvm/runtime/c_backend_api.h */

typedef int (*parallel_lambda)(int task_id, TVMParallelGroupEnv *penv, void *cdata);
typedef void (*move_error_fn)(void **error);
typedef void (*set_error_fn)(void *error);
typedef int (*dec_ref_fn)(void *object);
typedef void (*set_error_text_fn)(const char *kind, const char *message);

enum { TASKS_PER_THREAD = 8, MAX_TASKS = 0xffff, MAX_WORKERS = 255 };
enum { MODE_POOL = 0, MODE_SERIAL = 1, MODE_OPENMP = 2 };
static const long MIN_SPIN_NS = 20000;

static move_error_fn ffi_move_error;     /* TVMFFIErrorMoveFromRaised */
static set_error_fn ffi_set_error;       /* TVMFFIErrorSetRaised (takes a reference) */
static dec_ref_fn ffi_dec_ref;           /* TVMFFIObjectDecRef */
static set_error_text_fn ffi_set_text;   /* TVMFFIErrorSetRaisedFromCStr */
static _Atomic int team_size = 1;        /* the caller and team_size - 1 workers */
static long spin_ns = 50000, yield_ns = 2000000;

/* The current launch. `claim` is generation (32 bits) | tasks (16) | next task (16): a thread
 * takes task `next` by raising it with a compare-and-swap, so a task is taken once, and a
 * thread holding a stale word (an earlier launch) fails its swap. The lambda and its data are
 * written before the word that publishes them and change only after every task of the launch
 * has finished. */
static _Atomic uint64_t claim;
static _Atomic(parallel_lambda) job_lambda;
static _Atomic(void *) job_cdata;
static _Atomic int job_finished;         /* tasks of the launch done */
static _Atomic int job_failed;
static _Atomic(void *) job_error;        /* the first error a task raised */
static _Atomic uint32_t wake_seq;        /* the futex sleeping workers wait on */
static _Atomic int sleepers;
static pthread_mutex_t owner = PTHREAD_MUTEX_INITIALIZER;  /* held by the launching thread */
static _Atomic long last_end_ns;         /* when the last launch ended */
static _Atomic long gap_ns;              /* the running average of the gaps between launches */
static _Atomic long pooled;              /* launches that ran on the pool, ever */
static _Atomic int last_team = 0;        /* the threads the last launch was cut for */
static int workers;                       /* started, under `owner` */

static __thread int forked_here; /* this thread called fork() and is the child's thread */
static __thread int mode_here;   /* where this thread's launches run: MODE_* */
static __thread int in_task;     /* this thread is running a task */

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void after_fork_in_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  owner = fresh;
  workers = 0; /* the parent's workers do not exist here; a launch starts new ones */
  atomic_store(&last_end_ns, 0);
  atomic_store(&gap_ns, 0);
  atomic_store(&pooled, 0);
  atomic_store(&claim, 0);
  atomic_store(&sleepers, 0);
  forked_here = 1;
}

/* Launches from now on use `threads` threads (the caller included), at most MAX_WORKERS + 1. */
void sparsetir_task_pool_threads(int threads) {
  atomic_store(&team_size,
               threads < 1 ? 1 : threads > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : threads);
}

/* Set the tvm-ffi error functions, the pool's size (the caller included) and how long idle
 * workers spin and yield before they sleep. */
void sparsetir_task_pool_setup(void *move_error, void *set_error, void *dec_ref,
                               void *set_text, int threads, long spin, long yield) {
  ffi_move_error = (move_error_fn)move_error;
  ffi_set_error = (set_error_fn)set_error;
  ffi_dec_ref = (dec_ref_fn)dec_ref;
  ffi_set_text = (set_error_text_fn)set_text;
  sparsetir_task_pool_threads(threads);
  spin_ns = spin;
  yield_ns = yield;
  static int armed;
  if (!armed) {
    armed = 1;
    pthread_atfork(NULL, NULL, after_fork_in_child);
  }
}

/* Where the calling thread's next launches run: MODE_POOL, MODE_SERIAL or MODE_OPENMP. */
void sparsetir_task_pool_mode(int mode) { mode_here = mode; }

/* Take the next task of the launch in `*seen`'s generation, or of a newer one: 1 with the
 * task, its count, lambda and data filled in, 0 when none is left (`*seen`: the word read). */
static int take(uint64_t *seen, parallel_lambda *lambda, void **cdata, int *task, int *tasks) {
  uint64_t word = atomic_load_explicit(&claim, memory_order_acquire);
  for (;;) {
    *seen = word;
    int count = (int)((word >> 16) & 0xffff), next = (int)(word & 0xffff);
    if (next >= count) return 0;
    *lambda = atomic_load_explicit(&job_lambda, memory_order_relaxed);
    *cdata = atomic_load_explicit(&job_cdata, memory_order_relaxed);
    if (atomic_compare_exchange_weak_explicit(&claim, &word, word + 1, memory_order_acq_rel,
                                              memory_order_acquire)) {
      *task = next;
      *tasks = count;
      return 1;
    }
  }
}

static void run(parallel_lambda lambda, void *cdata, int task, int tasks) {
  TVMParallelGroupEnv env = {NULL, tasks};
  in_task = 1;
  if (lambda(task, &env, cdata) != 0) {
    void *error = NULL, *none = NULL;
    ffi_move_error(&error);
    if (error != NULL && !atomic_compare_exchange_strong(&job_error, &none, error)) {
      ffi_dec_ref(error);
    }
    atomic_store(&job_failed, 1);
  }
  in_task = 0;
  atomic_fetch_add_explicit(&job_finished, 1, memory_order_release);
}

/* Run tasks until none is left; the word last read. */
static uint64_t run_all(void) {
  uint64_t seen;
  parallel_lambda lambda;
  void *cdata;
  int task, tasks;
  while (take(&seen, &lambda, &cdata, &task, &tasks)) run(lambda, cdata, task, tasks);
  return seen;
}

/* How long an idle worker spins (see the file's comment). */
static long spin_budget(void) {
  long expected = 8 * atomic_load_explicit(&gap_ns, memory_order_relaxed);
  return expected < spin_ns ? (expected > MIN_SPIN_NS ? expected : MIN_SPIN_NS)
                            : (spin_ns < MIN_SPIN_NS ? spin_ns : MIN_SPIN_NS);
}

/* Sleep until a launch publishes a word other than `seen` (or a spurious wake-up). */
static void sleep_until_launch(uint64_t seen) {
  atomic_fetch_add(&sleepers, 1);
  uint32_t seq = atomic_load(&wake_seq);
  if (atomic_load(&claim) == seen) {
    syscall(SYS_futex, &wake_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
  }
  atomic_fetch_sub(&sleepers, 1);
}

/* A worker between launches: spin, then yield, then sleep, until the word is not `seen`. */
static void idle(uint64_t seen) {
  long start = now_ns(), spin = spin_budget();
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (atomic_load_explicit(&claim, memory_order_relaxed) != seen) return;
      relax();
    }
    long waited = now_ns() - start;
    if (waited >= yield_ns) break;
    if (waited >= spin) sched_yield();
  }
  sleep_until_launch(seen);
}

/* Worker `index` (1, 2, ...; the caller is 0) takes tasks while the pool has room for it, and
 * otherwise sleeps through launches. */
static void *worker_main(void *arg) {
  int index = (int)(intptr_t)arg;
  for (;;) {
    if (index < atomic_load_explicit(&team_size, memory_order_relaxed)) {
      idle(run_all());
    } else {
      sleep_until_launch(atomic_load(&claim));
    }
  }
  return NULL;
}

/* Start the workers not started yet (under `owner`); the ones that start are kept. */
static void start_workers(void) {
  while (workers < atomic_load(&team_size) - 1) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)(workers + 1));
    pthread_attr_destroy(&attr);
    if (failed) break;
    workers += 1;
  }
}

/* How many launches ran on the pool (not on their calling thread alone) in this process. */
long sparsetir_task_pool_launches(void) { return atomic_load(&pooled); }

/* The threads the last launch of this process was cut for: the pool's threads taking part, an
 * OpenMP region's team, or 1 for a launch run on its calling thread. */
int sparsetir_task_pool_last_team(void) { return atomic_load(&last_team); }

/* The workers started in this process (the parent's are not counted in a forked child). */
int sparsetir_task_pool_workers(void) {
  pthread_mutex_lock(&owner);
  int started = workers;
  pthread_mutex_unlock(&owner);
  return started;
}

/* A launch as one OpenMP parallel region whose threads claim the loop's shares one at a time
 * from a counter of the launch (see MODE_OPENMP). */
static int launch_openmp(parallel_lambda lambda, void *cdata, int num_task) {
  int team = atomic_load(&team_size);
  int tasks = num_task > 0 ? num_task : TASKS_PER_THREAD * team;
  if (tasks > MAX_TASKS) tasks = MAX_TASKS;
  _Atomic int next = 0;
  void *first_error = NULL;
  int failed = 0;
#pragma omp parallel num_threads(team)
  {
    TVMParallelGroupEnv env = {NULL, tasks};
    if (omp_get_thread_num() == 0) atomic_store(&last_team, omp_get_num_threads());
    in_task = 1;
    for (int task; (task = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed)) < tasks;) {
      if (lambda(task, &env, cdata) == 0) continue;
      void *error = NULL;
      ffi_move_error(&error);
#pragma omp critical(sparsetir_task_pool_error)
      {
        failed = 1;
        if (first_error == NULL) {
          first_error = error;
        } else if (error != NULL) {
          ffi_dec_ref(error);
        }
      }
    }
    in_task = 0;
  }
  if (!failed) return 0;
  if (first_error != NULL) {
    ffi_set_error(first_error);
    ffi_dec_ref(first_error);
  }
  return -1;
}

int sparsetir_task_pool_launch(parallel_lambda lambda, void *cdata, int num_task) {
  int team = atomic_load(&team_size);
  if (mode_here == MODE_OPENMP && team > 1 && !forked_here && !in_task &&
      !omp_in_parallel()) {
    return launch_openmp(lambda, cdata, num_task);
  }
  if (team <= 1 || forked_here || mode_here != MODE_POOL || in_task ||
      omp_in_parallel() || pthread_mutex_trylock(&owner) != 0) {
    TVMParallelGroupEnv env = {NULL, 1};
    if (!in_task) atomic_store(&last_team, 1);
    return lambda(0, &env, cdata);
  }
  start_workers();
  int active = workers + 1 < team ? workers + 1 : team;
  atomic_store(&last_team, active);
  atomic_fetch_add(&pooled, 1);
  long began = now_ns(), ended = atomic_load_explicit(&last_end_ns, memory_order_relaxed);
  if (ended > 0) {
    long gap = began - ended, average = atomic_load_explicit(&gap_ns, memory_order_relaxed);
    atomic_store_explicit(&gap_ns, average > 0 ? (3 * average + gap) / 4 : gap,
                          memory_order_relaxed);
  }
  int tasks = num_task > 0 ? num_task : TASKS_PER_THREAD * active;
  if (tasks > MAX_TASKS) tasks = MAX_TASKS;
  atomic_store(&job_finished, 0);
  atomic_store(&job_failed, 0);
  atomic_store(&job_error, NULL);
  atomic_store_explicit(&job_lambda, lambda, memory_order_relaxed);
  atomic_store_explicit(&job_cdata, cdata, memory_order_relaxed);
  uint64_t generation = (atomic_load(&claim) >> 32) + 1;
  atomic_store(&claim, (generation << 32) | ((uint64_t)tasks << 16));
  atomic_fetch_add(&wake_seq, 1);
  if (atomic_load(&sleepers) > 0) {
    syscall(SYS_futex, &wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
  }
  run_all();
  /* only tasks already taken remain: wait for them (their threads are running) */
  long start = 0;
  while (atomic_load_explicit(&job_finished, memory_order_acquire) < tasks) {
    relax();
    if (start == 0) start = now_ns();
    else if (now_ns() - start > spin_ns) sched_yield();
  }
  int failed = atomic_load(&job_failed);
  void *error = atomic_load(&job_error);
  atomic_store_explicit(&last_end_ns, now_ns(), memory_order_relaxed);
  pthread_mutex_unlock(&owner);
  if (!failed) return 0;
  if (error != NULL) {
    ffi_set_error(error);
    ffi_dec_ref(error);
  }
  return -1;
}

int sparsetir_task_pool_barrier(int task_id, TVMParallelGroupEnv *penv) {
  (void)task_id;
  if (penv->num_task <= 1) return 0; /* a launch run on one thread has no team to wait for */
  ffi_set_text("RuntimeError", "sparsetir's task pool cannot keep a parallel barrier (tasks "
               "are claimed one at a time); set TVM_THREAD_POOL_SPIN_COUNT to use TVM's pool");
  return -1;
}
