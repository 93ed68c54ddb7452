/* attention.h: the C kernel of examples/conform-c, the part a kernel author
 * replaces with their own. */
#ifndef CONFORM_C_ATTENTION_H
#define CONFORM_C_ATTENTION_H

#include <stdint.h>

/* attention computes o = softmax(q kᵀ · scale, masked) v and the row
 * log-sum-exp lse, in double, for q [B,Hq,M,D], k [B,Hkv,N,D],
 * v [B,Hkv,N,Dv], o [B,Hq,M,Dv], lse [B,Hq,M], row-major. Query head h
 * reads K/V head h / (Hq/Hkv). A key is visible when mask (B·M·N bytes,
 * 1 = may attend) says so, or, with mask NULL, when causal is 0 or
 * j <= i + past (the chunk's queries follow past cached keys).
 *
 * It returns 0, or 1 when a query row sees no key: *bad_b and *bad_i
 * then name the first such row and o is not written. */
int attention(const double *q, const double *k, const double *v, const uint8_t *mask,
              int B, int Hq, int Hkv, int M, int N, int D, int Dv,
              int causal, int past, double scale,
              double *o, double *lse, int *bad_b, int *bad_i);

#endif
