// Function attributes for the CPU kernels' hot loops.
//
// LOCO_CPU_CLONES compiles a function three times, for x86-64-v4 (AVX-512),
// AVX2 and baseline x86-64 (SSE2), and picks one once at load time (GNU
// ifunc). The results are bit-identical: every operation is the same IEEE op
// at any vector width, and no clone contracts to FMA (the library is built
// with -ffp-contract=off; the v4 target has FMA instructions, but they are
// only used where the source asks for a fused multiply-add, and it never
// does). The v4 clone keeps the 8-lane vectors of kernels/quantize_inl.h but
// gets AVX-512VL's narrowing moves and two-table permutes for them.
// LOCO_CPU_CLONES declares the function static: only a function with internal
// linkage may carry it (an exported entry point wraps one). Clang 14 compiles
// a function that a header declared without the attribute only once, for the
// first target (AVX-512), under its plain name, with no resolver: on a CPU
// without AVX-512 it ends in SIGILL. `static` makes that case a compile error.
// LOCO_CPU_INLINE force-inlines a helper so that each clone gets its own copy
// compiled for its target.
#pragma once

// Not under ThreadSanitizer: the ifunc resolver runs while the dynamic
// loader relocates, before TSan's runtime is set up, and crashes there.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define LOCO_CPU_CLONES static __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define LOCO_CPU_CLONES static
#endif
#define LOCO_CPU_INLINE [[gnu::always_inline]] inline
