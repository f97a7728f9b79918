/* The loop of a spread tile, 16-bit inputs to f16 (onnx_dequant's "tiles spread", the twentieth round
 * of docs/performance.md): (x - z) * s over 66960 int16 elements in tiles of 2046, the zero point and
 * scale spread beside them, each product rounded once to f16 through float32 rounded to odd. Variants
 * of the rounding to odd, best of 200 runs of 50 calls each:
 *
 *     gcc -O2 -march=native -o /tmp/odd_rounding scripts/odd_rounding.c && /tmp/odd_rounding
 *
 * Needs AVX-512 (the multiply rounded toward zero by embedded rounding) and F16C. A reference for the
 * explicit vectors in onnx_dequant/_jit.py (odd_product_ir), not part of the package.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#define N 66960
#define T 2046
static int16_t x[N]; static uint16_t o[N]; static int16_t zt[T+16]; static float zf[T+16]; static float st[T+16];
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
/* x - z for the 16 elements at i of the tile at t0, in float32: the zero point spread as int16 (the
 * difference taken in int32, converted once) or as float32 (subtracted after x's conversion) */
static inline __m512 diff_i16(int t0, int i){
  __m512i xv=_mm512_cvtepi16_epi32(_mm256_loadu_si256((void*)(x+t0+i)));
  __m512i zv=_mm512_cvtepi16_epi32(_mm256_loadu_si256((void*)(zt+i)));
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(xv,zv));
}
static inline __m512 diff_f32(int t0, int i){
  return _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256((void*)(x+t0+i)))),_mm512_loadu_ps(zf+i));
}
/* d * s in float32, as bits: rounded to nearest (not exact for f16: the double rounding), or rounded to odd */
static inline __m512i nearest(__m512 d, __m512 s){ return _mm512_castps_si512(_mm512_mul_ps(d,s)); }
/* to nearest, then one step toward zero where that rounded away from it, the last bit set where inexact */
static inline __m512i odd_from_nearest(__m512 d, __m512 s){
  __m512 p=_mm512_mul_ps(d,s), e=_mm512_fmsub_ps(d,s,p);
  __mmask16 k=_mm512_cmp_ps_mask(e,_mm512_setzero_ps(),_CMP_NEQ_OQ);
  __m512i pi=_mm512_castps_si512(p);
  __m512i a=_mm512_add_epi32(pi,_mm512_srai_epi32(_mm512_xor_si512(_mm512_castps_si512(e),pi),31));
  return _mm512_mask_or_epi32(pi,k,a,_mm512_set1_epi32(1));
}
/* toward zero by the instruction's embedded rounding; the inexact flag widened to a vector and or-ed in */
static inline __m512i odd_widened(__m512 d, __m512 s){
  __m512 p=_mm512_mul_round_ps(d,s,_MM_FROUND_TO_ZERO|_MM_FROUND_NO_EXC), e=_mm512_fmsub_ps(d,s,p);
  __mmask16 k=_mm512_cmp_ps_mask(e,_mm512_setzero_ps(),_CMP_NEQ_OQ);
  return _mm512_or_si512(_mm512_castps_si512(p),_mm512_srli_epi32(_mm512_movm_epi32(k),31));
}
/* toward zero; the last bit set by a masked or */
static inline __m512i odd_masked(__m512 d, __m512 s){
  __m512 p=_mm512_mul_round_ps(d,s,_MM_FROUND_TO_ZERO|_MM_FROUND_NO_EXC), e=_mm512_fmsub_ps(d,s,p);
  __mmask16 k=_mm512_cmp_ps_mask(e,_mm512_setzero_ps(),_CMP_NEQ_OQ);
  return _mm512_mask_or_epi32(_mm512_castps_si512(p),k,_mm512_castps_si512(p),_mm512_set1_epi32(1));
}
/* the tiles' loop: 16 elements a step, then f16 by vcvtps2ph (to nearest even) */
#define LOOP(NAME, DIFF, PRODUCT) __attribute__((noinline)) static void NAME(void){ \
  for(int t0=0;t0<N;t0+=T){ int n=N-t0<T?N-t0:T, i=0; \
    for(;i+16<=n;i+=16){ __m512 d=DIFF(t0,i), s=_mm512_loadu_ps(st+i); \
      _mm256_storeu_si256((void*)(o+t0+i),_mm512_cvtps_ph(_mm512_castsi512_ps(PRODUCT(d,s)),4)); } \
    for(;i<n;i++) o[t0+i]=0; } }
LOOP(A, diff_i16, odd_from_nearest)
LOOP(E, diff_i16, odd_widened)
LOOP(C, diff_i16, odd_masked)
LOOP(B, diff_f32, odd_masked)
LOOP(D, diff_f32, nearest)
__attribute__((noinline)) void M(void){ memcpy(o,x,sizeof(o)); }
void bench(const char*nm, void(*f)(void)){ double best=1e9; for(int r=0;r<200;r++){double t=now(); for(int k=0;k<50;k++) f(); t=(now()-t)/50; if(t<best)best=t;} printf("%-52s %6.2f us\n",nm,best*1e6);}
int main(void){
  for(int i=0;i<N;i++) x[i]=(int16_t)(i*7919);
  for(int i=0;i<T+16;i++){ zt[i]=(int16_t)(i*31); zf[i]=zt[i]; st[i]=0.001f*(i%6+1); }
  for(int round=0;round<2;round++){
    bench("memcpy of the input (134 KB)",M);
    bench("A: rounded to nearest, then to odd (7 operations)",A);
    bench("E: toward zero, the flag widened and or-ed in",E);
    bench("C: toward zero, a masked or (4 operations)",C);
    bench("B: as C, the zero point in float32",B);
    bench("D: no rounding to odd (not exact)",D);
  }
  return 0;
}
