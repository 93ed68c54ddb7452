// A query row whose keys are all masked: ggml_flash_attn_ext returns 0 for
// it, and the graph llama.cpp builds with flash attention off (mul_mat →
// soft_max_ext → mul_mat) returns NaN, on the same inputs and mask.
//
// Plain C against ggml's public API. With ggml built and installed:
//
//     cc -O2 masked_row.c -lggml -lggml-base -lggml-cpu -lm && ./a.out
//
// attnlab builds it with ggml's sources from github.com/ollama/ollama:
// (cd adapters/ggml && go run ./cmd/build) and runs ggml-masked-row.
// It exits 1 while the two paths disagree on the masked row.

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"

enum { D = 4, M = 2, N = 3 }; // one head, one batch item: 2 queries, 3 keys

static void fill(struct ggml_tensor * t, float seed) {
    float * x = (float *) t->data;
    for (int i = 0; i < ggml_nelements(t); i++) {
        x[i] = sinf(seed + 0.7f*i); // any finite values
    }
}

// attention returns o [D, M] of one path: flash_attn_ext or soft_max_ext
static void attention(bool flash, float o[M][D]) {
    struct ggml_init_params params = { 16*1024*1024, NULL, false };
    struct ggml_context * ctx = ggml_init(params);

    struct ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, M, 1, 1);
    struct ggml_tensor * k = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, N, 1, 1);
    struct ggml_tensor * v = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, N, 1, 1);
    fill(q, 1.0f);
    fill(k, 2.0f);
    fill(v, 3.0f);

    // llama.cpp's KV-cache mask: 0 where a query may attend, -INFINITY
    // elsewhere; row 0 sees every key, row 1 none
    float mask[M][N] = {
        { 0.0f,      0.0f,      0.0f      },
        { -INFINITY, -INFINITY, -INFINITY },
    };
    const float scale = 1.0f/sqrtf((float) D);

    struct ggml_tensor * out;
    if (flash) {
        // flash_attn_ext reads an F16 mask (llama.cpp casts its mask to F16)
        struct ggml_tensor * m16 = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, N, M, 1, 1);
        ggml_fp32_to_fp16_row(&mask[0][0], (ggml_fp16_t *) m16->data, M*N);
        out = ggml_flash_attn_ext(ctx, q, k, v, m16, scale, 0.0f, 0.0f);
        ggml_flash_attn_ext_set_prec(out, GGML_PREC_F32);
        // out is [D, 1 head, M, 1]: with one head, the same layout as [D, M]
    } else {
        struct ggml_tensor * m32 = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, N, M, 1, 1);
        memcpy(m32->data, mask, sizeof(mask));
        struct ggml_tensor * kq = ggml_mul_mat(ctx, k, q); // [N, M]
        ggml_mul_mat_set_prec(kq, GGML_PREC_F32);
        kq = ggml_soft_max_ext(ctx, kq, m32, scale, 0.0f);
        struct ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, v)); // [N, D]
        out = ggml_mul_mat(ctx, vt, kq); // [D, M]
    }

    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, 1);

    memcpy(o, out->data, sizeof(float)*M*D);
    ggml_free(ctx);
}

int masked_row(void) {
    float on[M][D], off[M][D];
    attention(true, on);
    attention(false, off);
    for (int i = 0; i < M; i++) {
        printf("row %d (%s)\n", i, i == 0 ? "sees 3 keys" : "sees no key");
        printf("  flash_attn_ext              ");
        for (int d = 0; d < D; d++) printf(" %9.6f", on[i][d]);
        printf("\n  mul_mat/soft_max_ext/mul_mat");
        for (int d = 0; d < D; d++) printf(" %9.6f", off[i][d]);
        printf("\n");
    }
    // row 0 agrees to rounding; row 1 is where they part
    int differ = 0;
    for (int d = 0; d < D; d++) {
        if (fabsf(on[0][d] - off[0][d]) > 1e-5f) {
            printf("row 0 differs at %d: the reproduction itself is wrong\n", d);
            fflush(stdout);
            return 2;
        }
        differ |= !(on[1][d] == off[1][d]); // NaN never equals
    }
    printf(differ ? "the masked row differs between the two paths\n" : "the two paths agree\n");
    fflush(stdout);
    return differ;
}

#ifndef MASKED_ROW_NO_MAIN
int main(void) { return masked_row(); }
#endif
