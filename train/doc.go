// Package train trains the model: AdamW with decoupled weight decay,
// global-norm gradient clipping, a linear-warmup cosine schedule, gradient
// accumulation and a seeded, deterministic data order. It never prints: a
// training loop reports through return values and callbacks.
//
// # Conventions
//
// The optimiser follows PyTorch's torch.optim.AdamW and
// torch.nn.utils.clip_grad_norm_ operation for operation, so that a run can
// be matched step by step against PyTorch in float64.
package train
