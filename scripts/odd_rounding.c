/* The loop of a spread tile, 16-bit inputs to f16 (onnx_dequant's "tiles spread", the twentieth round
 * of docs/performance.md): (x - z) * s over 66960 int16 elements in tiles of 2046, the zero point and
 * scale spread beside them, each product rounded once to f16 through float32 rounded to odd. Variants
 * of the rounding to odd, best of 200 runs of 50 calls each; then the rows' period (6 elements: 48,
 * three vectors) held in registers (the twenty-first round's ``_jit.period_run``), with the same
 * rounding and with the multiply-add rounded down and up (``_jit.odd_fma_ir``), whose bits it checks:
 *
 *     gcc -O2 -march=native -pthread -o /tmp/odd_rounding scripts/odd_rounding.c && /tmp/odd_rounding
 *
 * Last, the same loop on two threads, half the elements each, 20000 calls: whether the machine's two
 * CPUs have vector units of their own (then nearly 2x the throughput) or share one core's.
 *
 * Needs AVX-512 (the multiply rounded toward zero by embedded rounding) and F16C. A reference for the
 * explicit vectors in onnx_dequant/_jit.py (odd_product_ir), not part of the package.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
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
/* the period in registers: x - z and the scale of elements i..i+47 are the period's (rows of 6) */
#define PERIOD(NAME, BLOCK) __attribute__((noinline)) static void NAME(void){ \
  __m512 s0=_mm512_loadu_ps(st),s1=_mm512_loadu_ps(st+16),s2=_mm512_loadu_ps(st+32); \
  __m512 z0=_mm512_loadu_ps(zf),z1=_mm512_loadu_ps(zf+16),z2=_mm512_loadu_ps(zf+32); \
  __m512 c0=_mm512_loadu_ps(ct),c1=_mm512_loadu_ps(ct+16),c2=_mm512_loadu_ps(ct+32); \
  __m512i k0=_mm512_loadu_si512(kt),k1=_mm512_loadu_si512(kt+16),k2=_mm512_loadu_si512(kt+32); \
  (void)z0; (void)z1; (void)z2; (void)c0; (void)c1; (void)c2; (void)k0; (void)k1; (void)k2; \
  int i=0; for(;i+48<=N;i+=48){ BLOCK(i,s0,z0,c0,k0) BLOCK(i+16,s1,z1,c1,k1) BLOCK(i+32,s2,z2,c2,k2) } \
  for(;i<N;i++) o[i]=0; }
/* x + (2**23 + 2**17 - z) as bits is the float 2**23 + 2**17 + (x - z); its fused multiply-add with the scale
 * and -(2**23 + 2**17) * s is (x - z) * s, rounded down and up: the odd one of the two is it rounded to odd */
static int32_t kt[64]; static float ct[64];
#define MASKED(i,S,Z,C,K) { __m512 d=_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256((void*)(x+(i))))),Z); \
  _mm256_storeu_si256((void*)(o+(i)),_mm512_cvtps_ph(_mm512_castsi512_ps(odd_masked(d,S)),4)); }
#define DOWN_UP(i,S,Z,C,K) { __m512 f=_mm512_castsi512_ps(_mm512_add_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256((void*)(x+(i)))),K)); \
  __m512 rd=_mm512_fmadd_round_ps(f,S,C,_MM_FROUND_TO_NEG_INF|_MM_FROUND_NO_EXC); \
  __m512 ru=_mm512_fmadd_round_ps(f,S,C,_MM_FROUND_TO_POS_INF|_MM_FROUND_NO_EXC); \
  __mmask16 even=_mm512_testn_epi32_mask(_mm512_castps_si512(rd),_mm512_set1_epi32(1)); \
  _mm256_storeu_si256((void*)(o+(i)),_mm512_cvtps_ph(_mm512_mask_blend_ps(even,rd,ru),4)); }
PERIOD(P, MASKED)
PERIOD(Q, DOWN_UP)
/* the period loop over elements [lo, hi) (lo a multiple of 48), for two threads */
static void period_part(int lo, int hi){
  __m512 s0=_mm512_loadu_ps(st),s1=_mm512_loadu_ps(st+16),s2=_mm512_loadu_ps(st+32), z0=_mm512_setzero_ps(), z1=z0, z2=z0;
  (void)z0; (void)z1; (void)z2;
  __m512 c0=_mm512_loadu_ps(ct),c1=_mm512_loadu_ps(ct+16),c2=_mm512_loadu_ps(ct+32);
  __m512i k0=_mm512_loadu_si512(kt),k1=_mm512_loadu_si512(kt+16),k2=_mm512_loadu_si512(kt+32);
  for(int i=lo;i+48<=hi;i+=48){ DOWN_UP(i,s0,z0,c0,k0) DOWN_UP(i+16,s1,z1,c1,k1) DOWN_UP(i+32,s2,z2,c2,k2) } }
#define HALF (N/2/48*48)
static void* half_calls(void*which){ for(int r=0;r<20000;r++){ if(which) period_part(HALF,N); else period_part(0,HALF); } return 0; }
static void two_threads(void){
  double t=now(); for(int r=0;r<20000;r++) period_part(0,N); double one=now()-t;
  pthread_t a,b; t=now(); pthread_create(&a,0,half_calls,(void*)0); pthread_create(&b,0,half_calls,(void*)1);
  pthread_join(a,0); pthread_join(b,0); double two=now()-t;
  printf("Q whole: %.2f us a call; two threads, half each: %.2f us a call (%.2fx)\n",one/20000*1e6,two/20000*1e6,one/two); }
/* the core's clock: a chain of 4e9 dependent adds takes 4e9 cycles */
static void clock_rate(void){ long n=1000000000, a=0; double t=now();
  __asm__ volatile("1: add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n sub $1, %1\n jnz 1b" : "+r"(a), "+r"(n));
  printf("clock: %.2f GHz (a chain of dependent adds)\n", 4.0/(now()-t)); }
__attribute__((noinline)) void M(void){ memcpy(o,x,sizeof(o)); }
void bench(const char*nm, void(*f)(void)){ double best=1e9; for(int r=0;r<200;r++){double t=now(); for(int k=0;k<50;k++) f(); t=(now()-t)/50; if(t<best)best=t;} printf("%-52s %6.2f us\n",nm,best*1e6);}
int main(void){
  for(int i=0;i<N;i++) x[i]=(int16_t)(i*7919);
  /* the scale f16 values (11 significant bits), as the loop's are; the period's zero point of rows of 6 */
  for(int i=0;i<T+16;i++){ zt[i]=(int16_t)(i%6*31); zf[i]=zt[i]; st[i]=_cvtsh_ss(_cvtss_sh(0.001f*(i%6+1),0)); }
  for(int i=0;i<64;i++){ kt[i]=0x4B020000-zt[i]; ct[i]=-(8388608.0f+131072.0f)*st[i]; }
  { static uint16_t p[N]; int bad=0; P(); memcpy(p,o,sizeof(o)); Q(); for(int i=0;i<N;i++) bad+=o[i]!=p[i];
    printf("period loops' bits differ in %d of %d elements\n",bad,N); }
  for(int round=0;round<2;round++){
    bench("memcpy of the input (134 KB)",M);
    bench("A: rounded to nearest, then to odd (7 operations)",A);
    bench("E: toward zero, the flag widened and or-ed in",E);
    bench("C: toward zero, a masked or (4 operations)",C);
    bench("B: as C, the zero point in float32",B);
    bench("D: no rounding to odd (not exact)",D);
    bench("P: as B, the period in registers",P);
    bench("Q: the period, the multiply-add down and up",Q);
  }
  two_threads();
  clock_rate();
  return 0;
}
