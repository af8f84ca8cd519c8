// Which vector instruction sets this CPU runs, for the kernels that pick a
// path at run time. Internal to kernels/. Each answer is computed once and
// fixed for the process's life; on platforms without the x86 paths both
// are false.
#pragma once

namespace loco::cpu::detail {

// AVX-512 F, BW, VL and DQ, and FMA.
bool HaveAvx512();
// AVX2 and FMA.
bool HaveAvx2();

}  // namespace loco::cpu::detail
