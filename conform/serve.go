package conform

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/attnlab/attnlab/safetensors"
)

// Implementation is an attention implementation under test: a Go kernel
// called in-process, or an Adapter speaking for one in another process.
type Implementation interface {
	Capabilities() Capabilities
	// Attention answers one request; a refusal of the implementation (it
	// raised on the input) is a Response with Err set, an error is a
	// failure of the implementation's plumbing.
	Attention(r *Request) (*Response, error)
}

// Capabilities returns what the adapter declared.
func (a *Adapter) Capabilities() Capabilities { return a.Caps }

// Serve is the adapter side of the protocol for a Go implementation:
// it reads requests from r and writes answers to w until r ends. Use it in
// a main function to check a Go kernel with attnlab conform, as
// examples/conform-go does.
func Serve(r io.Reader, w io.Writer, impl Implementation) error {
	in := bufio.NewReaderSize(r, 1<<16)
	out := bufio.NewWriterSize(w, 1<<16)
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(in, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // attnlab closed our input: done
			}
			return err
		}
		buf := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
		if _, err := io.ReadFull(in, buf); err != nil {
			return err
		}
		req, err := safetensors.Parse(buf)
		if err != nil {
			return err
		}
		reply := safetensors.New()
		switch req.Metadata["op"] {
		case "hello":
			caps, err := json.Marshal(impl.Capabilities())
			if err != nil {
				return err
			}
			reply.Metadata = map[string]string{"op": "hello", "capabilities": string(caps)}
		case "attention":
			if reply, err = answer(req, impl); err != nil {
				reply = safetensors.New()
				reply.Metadata = map[string]string{"error": err.Error()}
			}
		default:
			reply.Metadata = map[string]string{"error": fmt.Sprintf("unknown op %q", req.Metadata["op"])}
		}
		data, err := reply.MarshalBinary()
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(data)))
		out.Write(hdr[:])
		out.Write(data)
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// answer decodes a request, runs impl and encodes its response.
func answer(f *safetensors.File, impl Implementation) (*safetensors.File, error) {
	r, err := decodeRequest(f)
	if err != nil {
		return nil, err
	}
	resp, err := impl.Attention(r)
	if err != nil {
		return nil, err
	}
	if resp.Err != "" {
		return nil, errors.New(resp.Err)
	}
	out := safetensors.New()
	out.Metadata = map[string]string{"op": "attention", "request": f.Metadata["request"]}
	put := func(name string, shape []int, x []float64) {
		if x == nil {
			return
		}
		if r.DType == "float32" {
			y := make([]float32, len(x))
			for i, v := range x {
				y[i] = float32(v)
			}
			out.SetF32(name, shape, y)
		} else {
			out.SetF64(name, shape, x)
		}
	}
	put("o", []int{r.B, r.Hq, r.M, r.Dv}, resp.O)
	put("lse", []int{r.B, r.Hq, r.M}, resp.LSE)
	put("dq", []int{r.B, r.Hq, r.M, r.D}, resp.DQ)
	put("dk", []int{r.B, r.Hkv, r.N, r.D}, resp.DK)
	put("dv", []int{r.B, r.Hkv, r.N, r.Dv}, resp.DV)
	put("dsinks", []int{r.Hq}, resp.DSinks)
	return out, nil
}

// decodeRequest is the inverse of Request.file.
func decodeRequest(f *safetensors.File) (*Request, error) {
	q, qs, err := f.Float64("q")
	if err != nil {
		return nil, err
	}
	k, ks, err := f.Float64("k")
	if err != nil {
		return nil, err
	}
	v, vs, err := f.Float64("v")
	if err != nil {
		return nil, err
	}
	if len(qs) != 4 || len(ks) != 4 || len(vs) != 4 {
		return nil, fmt.Errorf("q, k, v: shapes %v, %v, %v: want 4 dimensions each", qs, ks, vs)
	}
	r := &Request{B: qs[0], Hq: qs[1], M: qs[2], D: qs[3], Hkv: ks[1], N: ks[2], Dv: vs[3], Q: q, K: k, V: v,
		DType: "float64", Causal: f.Metadata["causal"] == "true", WantLSE: f.Metadata["want_lse"] == "true"}
	if f.Tensors["q"].DType == safetensors.F32 {
		r.DType = "float32"
	}
	for _, t := range []struct {
		name string
		dst  *[]float64
	}{{"do", &r.DO}, {"dq", &r.DQ0}, {"dk", &r.DK0}, {"dv", &r.DV0}, {"sinks", &r.Sinks}, {"alibi_slopes", &r.Alibi}} {
		if f.Has(t.name) {
			if *t.dst, _, err = f.Float64(t.name); err != nil {
				return nil, err
			}
		}
	}
	r.Convention = f.Metadata["convention"]
	if s, ok := f.Metadata["scale"]; ok {
		if r.Scale, err = strconv.ParseFloat(s, 64); err != nil {
			return nil, fmt.Errorf("metadata scale %q: %v", s, err)
		}
	}
	if s, ok := f.Metadata["softcap"]; ok {
		if r.Softcap, err = strconv.ParseFloat(s, 64); err != nil {
			return nil, fmt.Errorf("metadata softcap %q: %v", s, err)
		}
	}
	if s, ok := f.Metadata["window"]; ok {
		if r.Window, err = strconv.Atoi(s); err != nil {
			return nil, fmt.Errorf("metadata window %q: %v", s, err)
		}
	}
	if f.Has("mask") {
		m, _, err := f.Int64("mask")
		if err != nil {
			return nil, err
		}
		r.Mask = make([]bool, len(m))
		for i, x := range m {
			r.Mask[i] = x != 0
		}
	}
	for _, t := range []struct {
		name string
		dst  *[]int64
	}{{"q_pos", &r.QPos}, {"k_pos", &r.KPos}, {"q_valid", &r.QValid}, {"k_valid", &r.KValid}, {"q_seg", &r.QSeg}, {"k_seg", &r.KSeg}} {
		if f.Has(t.name) {
			if *t.dst, _, err = f.Int64(t.name); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}
