// Command ggml-conform serves ggml's CPU attention to attnlab conform over
// the protocol of docs/conform-protocol.md, as llama.cpp runs it:
//
//	ggml-conform [-flash=true|false] [-kv f32|f16] [-mask llama.cpp|ollama] [-threads N]
//
// With -flash (the default) a request is one ggml_flash_attn_ext; with
// -flash=false it is the graph llama.cpp builds when flash attention is
// off: mul_mat(K, Q) at F32 precision → soft_max_ext(mask, scale) →
// mul_mat(Vᵀ, P). K and V are stored as -kv says (F32, or F16 as
// llama.cpp's default cache holds them); Q and the output are F32.
//
// Masks are built as llama.cpp's llama_kv_cache::set_input_kq_mask builds
// them: an additive mask of 0 and −∞, one row per query, where key j is
// masked when its cell is empty (k_valid 0), belongs to another sequence
// (k_seg ≠ q_seg), lies in the query's future (causal, k_pos > q_pos), or
// falls out of a sliding window (llama_hparams::is_masked_swa, standard
// type: q_pos − k_pos ≥ W). Positions are q_pos = past + i and k_pos = j
// unless the request sends them. Two choices are the adapter's, not
// llama.cpp's, which has neither: a padding query (q_valid 0) gets a row of
// −∞ (it sees no cell), and a boolean mask is passed as 0/−∞ unchanged.
// With -mask ollama the mask is the one ollama's own Go KV cache
// (kvcache.Causal, which ollama's Go engine runs on ggml) builds, its code
// run here (ollama.go); it takes only a causal flag and a window.
//
// The scale defaults to 1/√D, llama.cpp's kq_scale. Sinks (one logit per
// query head, gpt-oss's) are ggml's own: ggml_flash_attn_ext_add_sinks,
// ggml_soft_max_add_sinks. Softcap c is flash_attn_ext's logit_softcap
// parameter, c·tanh(scale·q·k/c); on the soft_max path it is the graph
// llama.cpp builds for it (scale, tanh, scale before soft_max_ext), the
// attention scale moved in front of the tanh, where llama.cpp's models put
// it by scaling q. ggml's ALiBi derives each head's slope from one max_bias
// and cannot take the protocol's slopes: not declared. ggml has no backward
// for these graphs and returns no log-sum-exp, so neither is declared.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
	"github.com/attnlab/attnlab/conform"
)

type adapter struct {
	flash  bool
	kv     ggml.Type
	ollama bool // the mask of ollama's kvcache.Causal, not llama.cpp's
	runner *ggml.Runner
}

func (a *adapter) Capabilities() conform.Capabilities {
	name := "ggml_flash_attn_ext, CPU backend (llama.cpp -fa on)"
	if !a.flash {
		name = "ggml mul_mat → soft_max_ext → mul_mat, CPU backend (llama.cpp -fa off)"
	}
	masks := []string{conform.MaskCausal, conform.MaskBool, conform.MaskPositions, conform.MaskValidity, conform.MaskSegments, conform.MaskWindow}
	if a.ollama {
		name += ", ollama's KV-cache mask (kvcache.Causal)"
		masks = []string{conform.MaskCausal, conform.MaskWindow}
	}
	return conform.Capabilities{
		Name: name, Version: fmt.Sprintf("%s, K/V %s", ggml.Version(), a.kv),
		DTypes: []string{"float32"}, GQA: true, KVCache: true, Scale: true, Sinks: true, Softcap: true,
		Masks: masks,
	}
}

func (a *adapter) Attention(r *conform.Request) (*conform.Response, error) {
	if r.Hq%r.Hkv != 0 {
		return &conform.Response{Err: fmt.Sprintf("ggml broadcasts K/V heads only when Hkv divides Hq (Hq %d, Hkv %d)", r.Hq, r.Hkv)}, nil
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
	}
	mask := kqMask(r)
	if a.ollama {
		m, err := ollamaMask(r)
		if err != nil {
			return &conform.Response{Err: err.Error()}, nil
		}
		for b := range r.B {
			copy(mask[b*r.M*r.N:], m) // the same positions in every batch item
		}
	}
	at := ggml.NewAttn(ggml.AttnSpec{B: r.B, Hq: r.Hq, Hkv: r.Hkv, M: r.M, N: r.N, D: r.D, Dv: r.Dv,
		Flash: a.flash, KV: a.kv, Mask: true, Scale: float32(scale), Softcap: float32(r.Softcap), Sinks: r.Sinks != nil})
	defer at.Free()
	if r.Sinks != nil {
		at.SinksLogit.SetF32(f32(r.Sinks))
	}
	at.Q.SetF32(f32(r.Q))
	at.K.SetF32(f32(r.K))
	at.V.SetF32(f32(r.V))
	at.Mask.SetF32(mask)
	if err := at.Compute(a.runner); err != nil {
		return nil, err
	}
	o := at.Output()
	out := make([]float64, len(o))
	for i, x := range o {
		out[i] = float64(x)
	}
	return &conform.Response{O: out}, nil
}

// kqMask is the additive mask [B, M, N] of r, built as llama.cpp's
// llama_kv_cache::set_input_kq_mask builds it (see the package comment).
func kqMask(r *conform.Request) []float32 {
	past := r.N - r.M
	mask := make([]float32, r.B*r.M*r.N)
	for b := range r.B {
		for i := range r.M {
			p1 := int64(past + i) // the query's position
			if r.QPos != nil {
				p1 = r.QPos[b*r.M+i]
			}
			row := mask[(b*r.M+i)*r.N:][:r.N]
			for j := range r.N {
				row[j] = ggml.NegInf // std::fill(…, -INFINITY), then the visible cells
				if r.Mask != nil {
					if r.Mask[(b*r.M+i)*r.N+j] {
						row[j] = 0
					}
					continue
				}
				if r.QValid != nil && r.QValid[b*r.M+i] == 0 {
					continue // a padding query: no cell is its sequence's
				}
				p0 := int64(j) // the key's position
				if r.KPos != nil {
					p0 = r.KPos[b*r.N+j]
				}
				switch {
				case r.KValid != nil && r.KValid[b*r.N+j] == 0: // cells.is_empty(j)
				case r.QSeg != nil && r.KSeg != nil && r.KSeg[b*r.N+j] != r.QSeg[b*r.M+i]: // !cells.seq_has(j, seq_id)
				case r.Causal && p0 > p1: // mask future tokens
				case r.Window > 0 && p1-p0 >= int64(r.Window): // is_masked_swa, LLAMA_SWA_TYPE_STANDARD
				default:
					row[j] = 0
				}
			}
		}
	}
	return mask
}

func f32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func main() {
	flash := flag.Bool("flash", true, "ggml_flash_attn_ext; false: mul_mat → soft_max_ext → mul_mat, llama.cpp's graph with flash attention off")
	kv := flag.String("kv", "f32", "the type K and V are stored in: f32 or f16 (llama.cpp's default cache type)")
	mask := flag.String("mask", "llama.cpp", "the mask builder: llama.cpp (llama_kv_cache's rule) or ollama (ollama's kvcache.Causal, run)")
	threads := flag.Int("threads", 1, "ggml's CPU threads")
	flag.Parse()
	typ, err := ggml.ParseType(*kv)
	if err != nil || *threads < 1 || flag.NArg() > 0 || *mask != "llama.cpp" && *mask != "ollama" {
		fmt.Fprintln(os.Stderr, "usage: ggml-conform [-flash=true|false] [-kv f32|f16] [-mask llama.cpp|ollama] [-threads N]")
		os.Exit(2)
	}
	r := ggml.NewRunner(*threads)
	defer r.Close()
	if err := conform.Serve(os.Stdin, os.Stdout, &adapter{flash: *flash, kv: typ, ollama: *mask == "ollama", runner: r}); err != nil {
		fmt.Fprintln(os.Stderr, "ggml-conform:", err)
		os.Exit(1)
	}
}
