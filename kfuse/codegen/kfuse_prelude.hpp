// Included (as a precompiled header) by every generated kernel. Python semantics that C++ lacks.
#pragma once
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <type_traits>

template <class T>
inline T kf_slot(const char* args, int i) {  // host only: unpacks the launch buffer
  T v;
  std::memcpy(&v, args + 8 * i, sizeof(T));
  return v;
}

// Python's // and % on integers round toward negative infinity; C++'s toward zero.
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_floordiv(A a, B b) -> decltype(a / b) {
  auto q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_mod(A a, B b) -> decltype(a % b) {
  auto r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION auto kf_fmod_py(A a, B b) -> decltype(a + b) {
  auto r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
KOKKOS_INLINE_FUNCTION int64_t kf_ipow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION typename std::common_type<A, B>::type kf_min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B>
KOKKOS_INLINE_FUNCTION typename std::common_type<A, B>::type kf_max(A a, B b) {
  return a < b ? b : a;
}
template <class A>
KOKKOS_INLINE_FUNCTION A kf_abs(A a) {
  return a < 0 ? -a : a;
}

inline void kf_report(char* err, int64_t errlen, const char* what) {
  std::strncpy(err, what, static_cast<size_t>(errlen - 1));
  err[errlen - 1] = '\0';
}
