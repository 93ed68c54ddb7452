package faults

import (
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// RoPE returns the faults of RoPE: nn.RoPE with its forward, its backward or
// both replaced.
func RoPE() []Fault[checks.RoPEImpl] {
	ref := checks.RoPEReference
	return []Fault[checks.RoPEImpl]{
		{Name: "rope-backward-plus-theta", Impl: with(ref, func(i *checks.RoPEImpl) { i.Backward = ropeBackwardPlusTheta }),
			Breaks: "backward rotates dy by +θ, as the forward does, instead of by −θ (Rᵀ taken as R)"},
		{Name: "rope-backward-other-pairing", Impl: with(ref, func(i *checks.RoPEImpl) { i.Backward = ropeOtherPairingBackward }),
			Breaks: "the backward rotates the other pairing's features (half where the forward is interleaved, and the other way round)"},
		{Name: "rope-backward-batch0-positions", Impl: with(ref, func(i *checks.RoPEImpl) { i.Backward = ropeBackwardBatch0Positions }),
			Breaks: "the backward rotates every batch item by the positions of item 0"},
		{Name: "rope-wrong-pairing", FDBlind: true, Impl: with(ref, func(i *checks.RoPEImpl) { i.Forward, i.Backward = ropeOtherPairingForward, ropeOtherPairingBackward }),
			Breaks: "forward and backward both rotate the other pairing's features: a checkpoint of one convention read with the other"},
		{Name: "rope-positions-from-zero", FDBlind: true, Impl: with(ref, func(i *checks.RoPEImpl) {
			i.Forward, i.Backward = ropeIndexPositionsForward, ropeIndexPositionsBackward
		}),
			Breaks: "positions ignored, token t rotated by t·θ: wrong after a cache, with left padding or packed documents"},
		{Name: "rope-dx-assigned", FDBlind: true, Impl: with(ref, func(i *checks.RoPEImpl) { i.Backward = ropeDXAssigned }),
			Breaks: "dx written with = instead of +=: the q/k gradient of another path into the same buffer is lost"},
	}
}

func ropeBackwardPlusTheta(r nn.RoPE[float64], dx, dy []float64, pos []int, B, H, T int) {
	tmp := make([]float64, len(dy))
	r.Forward(tmp, dy, pos, B, H, T) // rotation by +θ
	for i, v := range tmp {
		dx[i] += v
	}
}

// ropeSwapPairing returns r with Half and Interleaved swapped.
func ropeSwapPairing(r nn.RoPE[float64]) nn.RoPE[float64] {
	if r.Pairing == nn.Half {
		r.Pairing = nn.Interleaved
	} else {
		r.Pairing = nn.Half
	}
	return r
}

func ropeOtherPairingForward(r nn.RoPE[float64], y, x []float64, pos []int, B, H, T int) {
	ropeSwapPairing(r).Forward(y, x, pos, B, H, T)
}

func ropeOtherPairingBackward(r nn.RoPE[float64], dx, dy []float64, pos []int, B, H, T int) {
	ropeSwapPairing(r).Backward(dx, dy, pos, B, H, T)
}

// ropeTokenIndices returns 0 … T−1 for every batch item, in place of pos.
func ropeTokenIndices(B, T int) []int {
	pos := make([]int, B*T)
	for i := range pos {
		pos[i] = i % T
	}
	return pos
}

func ropeIndexPositionsForward(r nn.RoPE[float64], y, x []float64, pos []int, B, H, T int) {
	r.Forward(y, x, ropeTokenIndices(B, T), B, H, T)
}

func ropeIndexPositionsBackward(r nn.RoPE[float64], dx, dy []float64, pos []int, B, H, T int) {
	r.Backward(dx, dy, ropeTokenIndices(B, T), B, H, T)
}

func ropeDXAssigned(r nn.RoPE[float64], dx, dy []float64, pos []int, B, H, T int) {
	clear(dx)
	r.Backward(dx, dy, pos, B, H, T)
}

func ropeBackwardBatch0Positions(r nn.RoPE[float64], dx, dy []float64, pos []int, B, H, T int) {
	p0 := make([]int, len(pos))
	for b := range B {
		copy(p0[b*T:(b+1)*T], pos[:T])
	}
	r.Backward(dx, dy, p0, B, H, T)
}
