// Function attributes for the CPU kernels' hot loops.
//
// LOCO_CPU_CLONES compiles a function twice, for AVX2 and for baseline x86-64
// (SSE2), and picks one once at load time (GNU ifunc). The results are
// bit-identical: every operation is the same IEEE op at either vector width,
// and neither clone contracts to FMA (the library is built with
// -ffp-contract=off, and the avx2 target does not enable FMA anyway).
// LOCO_CPU_INLINE force-inlines a helper so that each clone gets its own copy
// compiled for its target.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define LOCO_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOCO_CPU_CLONES
#endif
#define LOCO_CPU_INLINE [[gnu::always_inline]] inline
