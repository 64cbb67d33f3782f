/* The scalar type of one instantiation of the CPU kernels.
 *
 * Every op (except the memory ones) is written once over `real` and compiled
 * twice: FB_REAL_BITS=32 gives the fp32 reference behind ops_cpu(), and
 * FB_REAL_BITS=64 gives a double-precision twin used only by the tests, where
 * finite differences need double to say anything. This header maps the
 * choice to the type, the function-name suffix, the libm functions and the
 * BLAS gemm. Include it only from the kernel sources in kernels/cpu.
 */
#ifndef FABULA_KERNELS_CPU_REAL_H
#define FABULA_KERNELS_CPU_REAL_H

#include <math.h>
#include <stdint.h>

#include <cblas.h>

#ifndef FB_REAL_BITS
#error "compile the generic CPU kernels with -DFB_REAL_BITS=32 or -DFB_REAL_BITS=64"
#endif

#if FB_REAL_BITS == 32
#include "cpu/vec_exp.h"
typedef float real;
typedef uint32_t real_bits; /* an unsigned integer of real's width */
#define CPU_FN(name) name##_f32
#define R_EXP fb_expf /* vectorisable, within 1 ulp of expf (cpu/vec_exp.h) */
#define R_LOG logf
#define R_SQRT sqrtf
#define R_POW powf
#define R_COS cosf
#define R_SIN sinf
#define R_GEMM cblas_sgemm
#define R_GEMV cblas_sgemv
#elif FB_REAL_BITS == 64
typedef double real;
typedef uint64_t real_bits;
#define CPU_FN(name) name##_f64
#define R_EXP exp
#define R_LOG log
#define R_SQRT sqrt
#define R_POW pow
#define R_COS cos
#define R_SIN sin
#define R_GEMM cblas_dgemm
#define R_GEMV cblas_dgemv
#else
#error "FB_REAL_BITS must be 32 or 64"
#endif

#endif
