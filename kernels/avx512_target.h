// What a file with a vector path (AVX-512, or AVX2 as in simd_avx2.h)
// beside its portable one needs, on x86-64 with GCC or Clang (elsewhere
// LOCO_HAVE_AVX512_TARGET is 0 and the file keeps only its portable path;
// the name predates the AVX2 path, which needs the same): <immintrin.h>,
// and GCC 12's false -Wmaybe-uninitialized reports from the intrinsics
// turned off.
// Some intrinsics start their result from a self-initialised "undefined"
// vector, which GCC reports wherever they are inlined (GCC bug 105593);
// no caller reads an undefined lane.
//
// The pragmas hold from the include to the end of the including file:
// include it after every other header.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOCO_HAVE_AVX512_TARGET 1
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#else
#define LOCO_HAVE_AVX512_TARGET 0
#endif
