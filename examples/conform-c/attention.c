/* attention.c: a plain C attention forward (see attention.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"

static int visible(const uint8_t *mask, int b, int i, int j, int M, int N, int causal, int past) {
    if (mask) return mask[((size_t)b * M + i) * N + j] != 0;
    return !causal || j <= i + past;
}

int attention(const double *q, const double *k, const double *v, const uint8_t *mask,
              int B, int Hq, int Hkv, int M, int N, int D, int Dv,
              int causal, int past, double scale,
              double *o, double *lse, int *bad_b, int *bad_i) {
    /* pass 0: refuse a query row that sees no key, before writing anything */
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < M; i++) {
            int seen = 0;
            for (int j = 0; j < N && !seen; j++) seen = visible(mask, b, i, j, M, N, causal, past);
            if (!seen) {
                *bad_b = b;
                *bad_i = i;
                return 1;
            }
        }
    }
    double *s = malloc((size_t)N * sizeof *s);
    int group = Hq / Hkv;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < Hq; h++) {
            size_t kv = (size_t)b * Hkv + h / group;
            for (int i = 0; i < M; i++) {
                const double *qi = q + (((size_t)b * Hq + h) * M + i) * D;
                /* pass 1: scaled scores of the visible keys and their maximum */
                double mx = -INFINITY;
                for (int j = 0; j < N; j++) {
                    s[j] = -INFINITY;
                    if (!visible(mask, b, i, j, M, N, causal, past)) continue;
                    const double *kj = k + (kv * N + j) * D;
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                    s[j] = dot * scale;
                    if (s[j] > mx) mx = s[j];
                }
                /* pass 2: exponentials shifted by the maximum (no overflow) */
                double sum = 0;
                for (int j = 0; j < N; j++) {
                    s[j] = exp(s[j] - mx);
                    sum += s[j];
                }
                /* pass 3: the weighted sum of values */
                double *oi = o + (((size_t)b * Hq + h) * M + i) * Dv;
                memset(oi, 0, (size_t)Dv * sizeof *oi);
                for (int j = 0; j < N; j++) {
                    const double *vj = v + (kv * N + j) * Dv;
                    for (int d = 0; d < Dv; d++) oi[d] += s[j] / sum * vj[d];
                }
                lse[((size_t)b * Hq + h) * M + i] = mx + log(sum);
            }
        }
    }
    free(s);
    return 0;
}
