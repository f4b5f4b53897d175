/*
 * sparsetir_atomic_add_<dtype>: the atomic add TVM 0.27's CPU backend lacks (see
 * sparsetir/backend/cpu_atomics.py).
 *
 * A block annotated "atomic" under a parallel loop adds into outputs other threads add into
 * too; on the CPU each such `X[e] = X[e] + v` becomes a call of one of these functions with
 * the address of X[e]. Integers use the compiler's atomic fetch-and-add. Floating-point values
 * have no atomic add instruction on x86-64: the element is read, the sum computed, and the
 * result stored only if the element still holds what was read (compare-and-swap on its bits),
 * else the sum is computed again from the value another thread left. Relaxed ordering is
 * enough: nothing else is published through these stores, and the parallel launch's join
 * orders them before the kernel returns. Each returns 0 (TVM calls them as int32 externs).
 */
#include <stdint.h>
#include <string.h>

#define FLOAT_ADD(name, ftype, itype)                                                        \
  int32_t name(ftype *address, ftype value) {                                                \
    itype *bits = (itype *)address;                                                          \
    itype expected = __atomic_load_n(bits, __ATOMIC_RELAXED);                               \
    itype desired;                                                                           \
    do {                                                                                     \
      ftype current, sum;                                                                    \
      memcpy(&current, &expected, sizeof current);                                           \
      sum = current + value;                                                                 \
      memcpy(&desired, &sum, sizeof desired);                                                \
    } while (!__atomic_compare_exchange_n(bits, &expected, desired, 1, __ATOMIC_RELAXED,     \
                                          __ATOMIC_RELAXED));                                \
    return 0;                                                                                \
  }

#define INT_ADD(name, itype)                                                                 \
  int32_t name(itype *address, itype value) {                                                \
    __atomic_fetch_add(address, value, __ATOMIC_RELAXED);                                    \
    return 0;                                                                                \
  }

FLOAT_ADD(sparsetir_atomic_add_float32, float, uint32_t)
FLOAT_ADD(sparsetir_atomic_add_float64, double, uint64_t)
INT_ADD(sparsetir_atomic_add_int32, int32_t)
INT_ADD(sparsetir_atomic_add_int64, int64_t)
