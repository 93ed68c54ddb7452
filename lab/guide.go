package lab

// The long explanations behind `attnlab explain` and the HTML report. Each
// check carries a one-line Claim and Limit in package checks; the guides here
// add what the lab's reader needs without the source: the equation or
// invariant, the shapes, what a pass proves and what it cannot. They are
// keyed "op/check"; attention-flash shares attention's, and the checks every
// operation has (fd-elements, fd-directions, accumulates) have a generic
// entry keyed by the bare name.

// Step is one equation of an operation's forward or backward pass.
type Step struct {
	Path  string // the gradient path the step belongs to ("V path"), or ""
	Eq    string // the equation, in the notation of the design notes
	Shape string // the shapes it combines
	Why   string // why it has this form
}

// OpGuide explains one operation: what it computes and how the gradient
// flows back through it.
type OpGuide struct {
	What     string
	Forward  []Step
	Backward []Step
	Notes    []string // consequences the checks rely on
}

// CheckGuide is the long form of one check.
type CheckGuide struct {
	Tests  string // the equation or invariant tested
	Shapes string // the shapes involved
	Proves string // what a pass proves
	Cannot string // what a pass cannot prove, beyond the one-line Limit
}

var attentionGuide = OpGuide{
	What: "Scaled dot-product attention with causal, padding, segment and sliding-window masks, " +
		"grouped-query heads (Hq query heads share Hkv key/value heads) and a KV cache: " +
		"M new queries read N keys, the N − M cached ones included. The loss used by every check is " +
		"L = Σ O ⊙ G with a fixed random G, so dO = G and every output element matters.",
	Forward: []Step{
		{Eq: "S = Q Kᵀ · scale,  scale = 1/√D",
			Shape: "Q [B,Hq,M,D], K [B,Hkv,N,D] → S [B,Hq,M,N]; query head h reads KV head h / (Hq/Hkv)",
			Why:   "one score per (query, key) pair; the scale keeps the scores' variance near 1 as D grows"},
		{Eq: "P = softmax_row(S over the visible keys only: hidden ones are skipped, as if −∞),  lse = log Σⱼ exp(Sᵢⱼ)",
			Shape: "P [B,Hq,M,N], lse [B,Hq,M]",
			Why:   "each row of P is a probability distribution over the keys that query may read; the row maximum is subtracted before exp"},
		{Eq: "O = P V",
			Shape: "P [B,Hq,M,N], V [B,Hkv,N,Dv] → O [B,Hq,M,Dv]",
			Why:   "each output row mixes the value rows by the weights of its row of P"},
	},
	Backward: []Step{
		{Path: "V path (content)", Eq: "dV = Pᵀ dO",
			Shape: "[B,Hq,N,M] · [B,Hq,M,Dv] = [B,Hq,N,Dv], summed over the Hq/Hkv query heads of a group → dV [B,Hkv,N,Dv]",
			Why:   "value row j collects the error of every query row i that read it, weighted by how much it read, Pᵢⱼ. A key no query may see has Pᵢⱼ = 0 in every row, so its dV is exactly zero"},
		{Path: "Q/K path (weights)", Eq: "dP = dO Vᵀ",
			Shape: "[B,Hq,M,Dv] · [B,Hkv,Dv,N] = [B,Hq,M,N]",
			Why:   "how the loss changes if weight Pᵢⱼ changes: output row i moves along value row j"},
		{Path: "Q/K path (weights)", Eq: "dS = P ⊙ (dP − rowsum(P ⊙ dP))",
			Shape: "[B,Hq,M,N]; rowsum gives [B,Hq,M,1], broadcast along the row",
			Why:   "the softmax Jacobian diag(p) − ppᵀ applied to a row without building the N×N matrix. Every row of dS sums to zero, the mirror of softmax ignoring a constant added to a row; a masked entry has P = 0 and so dS = 0"},
		{Path: "Q/K path (weights)", Eq: "dQ = dS K · scale",
			Shape: "[B,Hq,M,N] · [B,Hkv,N,D] = [B,Hq,M,D]",
			Why:   "the scores were S = Q Kᵀ · scale: row i of dQ mixes the keys by row i of dS"},
		{Path: "Q/K path (weights)", Eq: "dK = dSᵀ Q · scale",
			Shape: "[B,Hq,N,M] · [B,Hq,M,D] = [B,Hq,N,D], summed over the query heads of a group → dK [B,Hkv,N,D]",
			Why:   "the same product seen from the key side; a shared KV head accumulates the gradient of every query head that reads it"},
	},
	Notes: []string{
		"K and V both come from the past tokens but reach the loss by different paths: V carries content (its gradient needs only P), K decides the weights (its gradient passes through the softmax Jacobian). A backward through V alone would learn what to output but never what to attend to.",
		"With a loss on query row 0 only, dV_j = P₀ⱼ dO₀ and dK_j = scale · dS₀ⱼ q₀ with dS₀ⱼ = P₀ⱼ(…): both are exactly zero for every key row 0 may not see. The first-row-grad check asserts exactly that, by == 0, not by a tolerance.",
		"Finite differences compare this backward with the forward as written. A forward that reads the wrong keys has a backward that matches it, equally wrong: masks, head mapping and positions are tested by the semantic checks.",
	},
}

var flashGuide = OpGuide{
	What: "The same attention computed by a fused, FlashAttention-2 style kernel: key/value tiles are streamed " +
		"with an online softmax, so P [B,Hq,M,N] is never stored; only O and lse [B,Hq,M] are kept for the backward.",
	Forward: []Step{
		{Eq: "for each key tile: m' = max(m, rowmax(S_tile)),  ℓ' = ℓ·e^(m−m') + rowsum(e^(S_tile − m')),  O' = O·e^(m−m') + e^(S_tile − m') V_tile",
			Shape: "tiles of 64 queries (all query heads of a KV group) × 64 keys; m, ℓ per query row",
			Why:   "the softmax is assembled tile by tile, the output rescaled when the row maximum grows; at the end O /= ℓ and lse = m + log ℓ"},
	},
	Backward: []Step{
		{Eq: "Δ = rowsum(dO ⊙ O)", Shape: "[B,Hq,M]",
			Why: "equals rowsum(P ⊙ dP), so the row sum of the softmax backward needs no second pass over the keys (the delta-identity check)"},
		{Eq: "P = exp(S − lse) recomputed per tile;  dV += Pᵀ dO;  dP = dO Vᵀ;  dS = P ⊙ (dP − Δ)",
			Shape: "tiles of [M,N]", Why: "the reference's equations, in tiles, with P rebuilt from the saved lse"},
		{Eq: "dQ += dS K · scale;  dK += dSᵀ Q · scale", Shape: "as the reference", Why: "as the reference"},
	},
	Notes: []string{
		"Every attention check runs on this kernel too, plus agrees-with-reference, which compares its outputs and gradients with the reference on seven configurations.",
	},
}

var opGuides = map[string]OpGuide{
	"attention":       attentionGuide,
	"attention-flash": flashGuide,
	"rmsnorm": {
		What: "RMSNorm of each row of width D, scaled by a learned weight w, as Llama's input_layernorm.",
		Forward: []Step{
			{Eq: "r = sqrt(mean(x²) + ε),  y = w ⊙ x / r", Shape: "x, y [n,D], w [D], r [n] (1/r saved)",
				Why: "the row is divided by its root mean square; ε under the root makes an all-zero row give 0, not 0/0"},
		},
		Backward: []Step{
			{Eq: "g = dy ⊙ w;  dx = g/r − x · mean(g ⊙ x)/r³", Shape: "dx [n,D]",
				Why: "the direct term g/r minus the feedback through r, which depends on every element of the row. Treating r as a constant drops the second term: the forward still looks right"},
			{Eq: "dw = Σᵢ dyᵢ ⊙ xᵢ / rᵢ", Shape: "dw [D]", Why: "w scales every row, so its gradient sums over rows"},
		},
		Notes: []string{"At ε = 0 the output ignores the scale of x, so dx is orthogonal to x row by row: the dx-orthogonal-x check."},
	},
	"rope": {
		What: "Rotary position embedding: each pair of features of a query or key head is rotated by the angle p·θ_k, " +
			"θ_k = base^(−2k/D). Pairs are (k, k+D/2) in the half pairing of Hugging Face and (2k, 2k+1) in Meta's interleaved one.",
		Forward: []Step{
			{Eq: "[y₀; y₁] = R(pθ_k) [x₀; x₁],  R(a) = [cos a  −sin a; sin a  cos a]", Shape: "x, y [B,H,T,D], positions [B,T], θ [D/2]",
				Why: "a rotation per pair; (R(pθ)q)ᵀ(R(tθ)k) = qᵀR((t−p)θ)k, so scores see only the position difference"},
		},
		Backward: []Step{
			{Eq: "[dx₀; dx₁] = R(pθ_k)ᵀ [dy₀; dy₁] = R(−pθ_k) [dy₀; dy₁]", Shape: "dx, dy [B,H,T,D]",
				Why: "for a fixed position RoPE is an orthogonal linear map; its transpose is the rotation by the opposite angle. Positions and frequencies are not learned and get no gradient"},
		},
		Notes: []string{"Position 0 is the identity and every position preserves norms; neither property can tell a wrong angle from a right one, which is why hf-rotate-half recomputes the published definitions."},
	},
	"swiglu": {
		What: "Llama's gated MLP: gate and up projections to width F, SiLU gate, down projection back to D.",
		Forward: []Step{
			{Eq: "a = x wGateᵀ,  u = x wUpᵀ", Shape: "x [n,D], wGate, wUp [F,D] → a, u [n,F]", Why: "two projections of the same input"},
			{Eq: "h = silu(a) ⊙ u,  silu(a) = a·σ(a)", Shape: "h [n,F]", Why: "multiplicative gate"},
			{Eq: "y = h wDownᵀ", Shape: "wDown [D,F] → y [n,D]", Why: "back to the model width"},
		},
		Backward: []Step{
			{Eq: "dh = dy wDown,  dwDown = dyᵀ h", Shape: "dh [n,F], dwDown [D,F]", Why: "a linear layer"},
			{Eq: "da = dh ⊙ u ⊙ silu'(a),  du = dh ⊙ silu(a),  silu'(a) = σ(a)(1 + a(1 − σ(a)))", Shape: "[n,F]",
				Why: "each branch of the product gets the other branch times the upstream gradient; the gate also needs SiLU's own derivative"},
			{Eq: "dx = da wGate + du wUp,  dwGate = daᵀ x,  dwUp = duᵀ x", Shape: "dx [n,D], dwGate, dwUp [F,D]",
				Why: "x feeds both branches, so dx is the sum of the two paths"},
		},
	},
	"crossentropy": {
		What: "Softmax cross-entropy over a vocabulary of V, averaged over the rows whose target is not the ignore index −100.",
		Forward: []Step{
			{Eq: "p = softmax(z),  loss = (1/count) Σ_{counted i} −log pᵢ[tᵢ]", Shape: "z, p [n,V], targets [n]",
				Why: "the mean over counted rows only; the row maximum is subtracted before exp"},
		},
		Backward: []Step{
			{Eq: "dzᵢ = dloss · (pᵢ − onehot(tᵢ)) / count;  ignored rows: 0", Shape: "dz [n,V]",
				Why: "∂(log Σ eᶻ − z_t)/∂z = p − onehot; each row of dz sums to zero because both have mass one"},
		},
	},
	"linear": {
		What: "A linear layer y = x wᵀ + b with w stored (Out, In) as nn.Linear and Hugging Face store it.",
		Forward: []Step{
			{Eq: "y = x wᵀ + b", Shape: "x [n,In], w [Out,In], b [Out] → y [n,Out]", Why: "one dot product per output feature"},
		},
		Backward: []Step{
			{Eq: "dx = dy w", Shape: "[n,Out]·[Out,In] = [n,In]", Why: "the transpose of the forward's map"},
			{Eq: "dw = dyᵀ x,  db = Σᵢ dyᵢ", Shape: "dw [Out,In], db [Out]", Why: "every row of x meets every output feature"},
		},
	},
	"embedding": {
		What: "Token embedding: a row lookup in a table (V, D).",
		Forward: []Step{
			{Eq: "out[i] = table[tokens[i]]", Shape: "tokens [n], table [V,D] → out [n,D]", Why: "a copy"},
		},
		Backward: []Step{
			{Eq: "dtable[tokens[i]] += dout[i]", Shape: "dtable [V,D]",
				Why: "a scatter-add: a token that occurs twice gets the sum of both rows' gradients"},
		},
	},
	"attention-layer": {
		What: "The attention sublayer of a Llama block: q, k, v projections, RoPE at the tokens' positions, GQA attention (the fused kernel), output projection.",
		Forward: []Step{
			{Eq: "q = x Wqᵀ,  k = x Wkᵀ,  v = x Wvᵀ", Shape: "x [B·T,Dim], Wq [Hq·Dh,Dim], Wk, Wv [Hkv·Dh,Dim]", Why: "projections, then split into heads"},
			{Eq: "q = RoPE(q, qpos),  k = RoPE(k, kpos)", Shape: "[B,H,T,Dh]", Why: "positions, never array indices"},
			{Eq: "o = attention(q, k, v),  y = o Woᵀ", Shape: "o [B·T,Hq·Dh], Wo [Dim,Hq·Dh] → y [B·T,Dim]", Why: "the attention op above"},
		},
		Backward: []Step{
			{Eq: "do = dy Wo,  dWo = dyᵀ o", Shape: "[B·T,Hq·Dh], [Dim,Hq·Dh]", Why: "the output projection"},
			{Eq: "dq, dk, dv = attention backward", Shape: "head layout", Why: "the V path and the Q/K path of the attention op"},
			{Eq: "dq, dk rotated back by −θ (RoPE backward)", Shape: "[B,H,T,Dh]", Why: "the transpose of the rotation"},
			{Eq: "dx = dq Wq + dk Wk + dv Wv,  dWq = dqᵀ x, …", Shape: "dx [B·T,Dim]",
				Why: "q, k and v all come from x: its gradient is the sum of the three paths"},
		},
	},
	"block": {
		What: "One pre-norm Llama decoder block: h = x + Attn(RMSNorm(x)), y = h + SwiGLU(RMSNorm(h)).",
		Forward: []Step{
			{Eq: "h = x + Attn(RMSNorm(x))", Shape: "[B·T,Dim]", Why: "residual around the attention sublayer"},
			{Eq: "y = h + SwiGLU(RMSNorm(h))", Shape: "[B·T,Dim]", Why: "residual around the MLP"},
		},
		Backward: []Step{
			{Eq: "dh = dy + RMSNorm′ᵀ(SwiGLU′ᵀ(dy))", Shape: "[B·T,Dim]", Why: "the residual passes dy straight through and adds the sublayer's path"},
			{Eq: "dx = dh + RMSNorm′ᵀ(Attn′ᵀ(dh))", Shape: "[B·T,Dim]", Why: "the same at the first residual; dropping either identity term loses most of the gradient"},
		},
	},
	"decoder": {
		What: "The whole model: embedding, L blocks, final RMSNorm, LM head, cross-entropy on next-token targets; and its KV-cache decoding.",
		Forward: []Step{
			{Eq: "x₀ = Embed(tokens);  x_{l+1} = Block_l(x_l);  logits = RMSNorm(x_L) Headᵀ", Shape: "tokens [B,T] → logits [B·T,V]", Why: "the stack"},
			{Eq: "loss = mean over counted t of −log softmax(logits_t)[token_{t+1}]", Shape: "scalar", Why: "position t predicts the next token, within its document"},
		},
		Backward: []Step{
			{Eq: "dloss = 1;  dlogits = (p − onehot(target))/count", Shape: "[B·T,V]",
				Why: "the chain rule is seeded with 1; the mean's 1/count enters here, and ignored targets get 0"},
			{Eq: "dHead = dlogitsᵀ x̂;  dx̂ = dlogits Head", Shape: "Head [V,Dim], x̂ = RMSNorm(x_L) [B·T,Dim]",
				Why: "the LM head is a linear layer"},
			{Eq: "dx_L = RMSNorm backward(dx̂)", Shape: "[B·T,Dim], and the final norm's weight [Dim]", Why: "the final norm"},
			{Eq: "dx_l = Block_l backward(dx_{l+1}),  l = L−1 … 0", Shape: "[B·T,Dim], and each block's weights",
				Why: "blocks in exact reverse order; each adds its parameters' gradients"},
			{Eq: "dEmbed[tokens[t]] += dx₀[t]", Shape: "[V,Dim]",
				Why: "a scatter-add; with a tied head, Head is Embed and both gradients add into the same buffer"},
		},
		Notes: []string{"Decoding with the KV cache must give the full pass's logits: positions continue after the cache, cached keys are rotated once, and a chunk's mask is offset by the cache length."},
	}, "infonce": {
		What: "The contrastive head of a dual encoder: mean pooling over real tokens, L2 normalisation, cosine similarities over temperature, InfoNCE with in-batch and hard negatives and a false-negative mask.",
		Forward: []Step{
			{Eq: "e = Σ_t valid_t x_t / Σ_t valid_t;  u = e / ‖e‖", Shape: "x [B,T,D] → e, u [B,D]", Why: "one vector per sequence, its length removed"},
			{Eq: "S = U_q U_dᵀ / τ;  Lᵢ = −log exp(Sᵢᵢ) / Σ_{j unmasked} exp(Sᵢⱼ)", Shape: "S [B, B + hard negatives]",
				Why: "each query must pick its own document among the batch's; masked entries (other copies of the positive) leave the denominator, the positive never does"},
		},
		Backward: []Step{
			{Eq: "dS = (softmax_row(S) − onehot) / B, zero where masked", Shape: "[B, B+K]", Why: "every row of dS sums to zero"},
			{Eq: "dU_q = dS U_d / τ;  dU_d = dSᵀ U_q / τ;  dτ = −Σ dS ⊙ S / τ", Shape: "[B,D]; scalar", Why: "S is bilinear in the unit vectors and scaled by 1/τ"},
			{Eq: "de = (du − u (u · du)) / ‖e‖", Shape: "[B,D]", Why: "the normalisation's Jacobian removes the component along u: scaling e changes nothing"},
			{Eq: "dx_t = valid_t de / Σ valid", Shape: "[B,T,D]", Why: "the mean spreads the gradient evenly over real tokens; padding gets none"},
		},
		Notes: []string{"Skipping the normalisation in the backward, flipping the temperature's sign, dropping the positive from its denominator or masking it: the faults of this head."},
	},
	"listwise": {
		What: "The head of a cross-encoder reranker: one sequence \"query SEP code\" per (query, candidate) pair, pooled into the product of its two unit side means, a linear score, and the softmax cross-entropy of each query's group of candidates (the positive first, then hard negatives).",
		Forward: []Step{
			{Eq: "q = mean of the query's token vectors, c = mean of the code's;  u = q/‖q‖, v = c/‖c‖", Shape: "x [G·K,T,D] → u, v [G·K,D]",
				Why: "each side in one unit vector; the separator and padding are not pooled"},
			{Eq: "f = u ⊙ v;  s = w · f", Shape: "f [G·K,D] → s [G,K]", Why: "a weighted cosine of the two sides: with w = 1/τ, a dual encoder's score"},
			{Eq: "L_g = −log exp(s[g,0]) / Σ_{k valid} exp(s[g,k]);  L = mean_g L_g", Shape: "scalar",
				Why: "each query's positive must outscore the hard negatives the first stage ranked high; padding candidates of short groups leave the denominator"},
		},
		Backward: []Step{
			{Eq: "ds = (softmax_group(s) − onehot(0)) / G, zero where invalid", Shape: "[G,K]", Why: "each group's ds sums to zero: a bias on s would get no gradient, so the head has none"},
			{Eq: "df = ds ⊗ w;  dw = Σ ds · f", Shape: "[G·K,D]; [D]", Why: "s is linear in both f and w"},
			{Eq: "du = df ⊙ v,  dv = df ⊙ u;  dq = (du − u(u·du))/‖q‖,  dc = (dv − v(v·dv))/‖c‖", Shape: "[G·K,D]", Why: "the product rule, then each normalisation's projection"},
			{Eq: "dx_t = dq/n_q on query tokens, dc/n_c on code tokens, 0 elsewhere", Shape: "[G·K,T,D]", Why: "each mean spreads its gradient over its side; the encoder takes it from there"},
		},
		Notes: []string{"Dropping the positive from its denominator, counting padding candidates, taking the wrong candidate as the positive: each is consistent with its backward and invisible to finite differences; the semantic checks catch them."},
	},
}

// genericChecks are the long forms of the checks every operation runs.
var genericChecks = map[string]CheckGuide{
	"fd-elements": {
		Tests: "for every element x of every input: ∂L/∂x from the backward equals the 4-point central difference " +
			"(8L(x+ε) − 8L(x−ε) − L(x+2ε) + L(x−2ε)) / 12ε of the scalar loss L = Σ out ⊙ G, with G a fixed random tensor; " +
			"|analytic − numeric| ≤ 1e-11 + 1e-8·max(|analytic|, |numeric|), in float64, ε = 1e-3 (2e-4 for the decoder)",
		Shapes: "small shapes, so that every element is perturbed (see the operation's inputs); G has the output's shape and becomes dout",
		Proves: "the backward is the derivative of the forward, element by element, on these shapes and inputs: a dropped term, a wrong factor, a transposed product or a wrong index shows up as a mismatch",
		Cannot: "it compares the backward with the forward as written. A forward with a wrong mask, head mapping, position or target has a backward that matches it, equally wrong; " +
			"and a point where the function is not smooth, or a bug that only shows at other shapes, can pass",
	},
	"fd-directions": {
		Tests:  "for a few random unit directions u over all inputs at once: uᵀ∇L equals (L(x+εu) − L(x−εu))/2ε (4-point stencil), the error measured against ‖∇L‖",
		Shapes: "a larger case than fd-elements, thousands of inputs, where perturbing every element would be slow",
		Proves: "the gradient is right in aggregate at realistic sizes: tiling, strides and loops that only run at larger shapes are exercised",
		Cannot: "a handful of directions: an error confined to a few elements moves uᵀ∇L very little and may hide; the element check covers that on small shapes",
	},
	"accumulates": {
		Tests:  "the backward adds into its gradient buffers: run once on zeroed buffers and once on buffers pre-filled with random sentinels; after − before must equal the fresh result",
		Shapes: "the shapes of fd-elements",
		Proves: "the += contract that residuals, weight tying, GQA's shared heads and gradient accumulation over micro-batches rely on",
		Cannot: "the values themselves (finite differences check those): an = instead of += passes finite differences on zeroed buffers and is caught only here",
	},
}

var checkGuides = map[string]CheckGuide{
	"attention/fd-elements": {
		Tests:  genericChecks["fd-elements"].Tests,
		Shapes: "two cases: an MQA chunk after a cache (B=1, Hq=2, Hkv=1, M=2, N=5, D=4, Dv=3, causal) and a GQA batch with left padding, two packed documents, a right-padding query and a window of 3 (B=2, Hq=4, Hkv=2, M=3, N=6, D=3, Dv=2): every element of q, k, v",
		Proves: "dQ, dK and dV are the derivatives of this forward, masks, padding and segments included",
		Cannot: "that the mask is the right one: with the mask removed from forward and backward alike, the numbers still agree (the fault mask-dropped passes this check)",
	},
	"attention/fd-directions": {
		Tests:  genericChecks["fd-directions"].Tests,
		Shapes: "B=2, Hq=8, Hkv=2, M=24, N=40, D=16, Dv=8, causal: 9984 inputs, 6 directions",
		Proves: genericChecks["fd-directions"].Proves,
		Cannot: genericChecks["fd-directions"].Cannot,
	},
	"attention/first-row-grad": {
		Tests:  "with dO zero except on query row 0 (the loss reads row 0 only), dK_j and dV_j must be exactly 0 (compared with ==) for every key row 0 may not see, and non-zero for each it sees",
		Shapes: "B=1, Hq=2, Hkv=1, M=3, N=7, causal: row 0 is at position 4, keys 5 and 6 are its future",
		Proves: "no gradient path from row 0's loss reaches a future key: the backward's mask matches the rule, and dV is formed with Pᵀ, not P",
		Cannot: "what other rows reach (the visibility check covers those); that the loss itself is the right one",
	},
	"attention/future-invariance": {
		Tests:  "change the queries, keys and values of the tokens after position t; the outputs at positions ≤ t must be bit-identical",
		Shapes: "B=2, Hq=4, Hkv=2, M=N=6, causal",
		Proves: "causality of the forward: the past cannot read the future",
		Cannot: "anything about gradients; that the past sees all it should (a mask hiding too much passes)",
	},
	"attention/visibility": {
		Tests:  "perturb value row j and watch output row i: it must change exactly when Visible(i, j) holds, for every (i, j)",
		Shapes: "two configurations with a cache offset, padding, packed segments and a window (8 query rows)",
		Proves: "the forward reads exactly the keys the mask rule allows: no more (leaks) and no fewer (hidden history)",
		Cannot: "the gradient's values; whether the rule itself matches the task (it is the specification)",
	},
	"attention/conventions": {
		Tests:  "the three causal conventions (position, bottom-right, top-left) give the same visibility and outputs at M = N, and differ as documented at M ≠ N",
		Shapes: "M=N=4; M=2, N=5 (a chunk after 3 cached tokens); M=1, N=6, a cache with two empty slots and a window of 2, where bottom-right counts slots and position counts tokens",
		Proves: "the implementation honours the convention it is given; top-left (tril(ones(M,N))) hides the cache from a new chunk, as the design notes warn",
		Cannot: "the numbers computed where it looks",
	},
	"attention/chunked-equals-full": {
		Tests:  "run 7 tokens in one pass, and in chunks of 1, 2+2+2+1, 3+3+1 and 5+2 against the growing cache; every chunking must give the full pass's outputs",
		Shapes: "7 tokens, cache offsets 0…6",
		Proves: "a chunk's mask is offset by the cache length (key_position ≤ past_length + local_query_index)",
		Cannot: "the model's KV cache (positions, rotation of cached keys): the decoder's full-equals-decoding checks that",
	},
	"attention/padding-invariance": {
		Tests:  "pad a sequence by 2 tokens on the left, then on the right; real tokens' outputs and gradients must not change, and pads must get zero output and zero gradient",
		Shapes: "one sequence, two amounts of padding",
		Proves: "padding keys are masked and padding queries pass nothing back",
		Cannot: "other lengths and amounts; positions of a padded sequence are the caller's (the layer checks RoPE under padding)",
	},
	"attention/packing-equals-separate": {
		Tests:  "two documents of 3 and 4 tokens packed into one row with segment ids and positions restarting at 0 give the outputs and gradients of two separate runs",
		Shapes: "one row of 7 tokens against B=2 rows of 3 and 4",
		Proves: "segment ids isolate documents in both directions: forward and backward",
		Cannot: "whether the caller assigned the segments right; an end-of-text token alone does not isolate documents",
	},
	"attention/gqa-equals-mha": {
		Tests:  "GQA with Hq=6, Hkv=2 equals MHA on K, V physically repeated per query head: same O, lse and dQ, and dK, dV equal to the sums over each group",
		Shapes: "K, V [B,2,N,D] repeated to [B,6,N,D]: query heads 0–2 read KV head 0, 3–5 read KV head 1",
		Proves: "the head mapping kvh = h / (Hq/Hkv) and the accumulation of a shared head's gradient over its group",
		Cannot: "that contiguous grouping is what a checkpoint expects: repeat_kv's order is taken as the definition",
	},
	"attention/ds-rowsum": {
		Tests:  "every row of dS sums to zero; seen through the outputs as Σⱼ dKⱼ = scale · Σᵢ (Σⱼ dSᵢⱼ) qᵢ = 0 for every KV head",
		Shapes: "dK [B,Hkv,N,D] summed over N",
		Proves: "the − rowsum(P ⊙ dP) term of the softmax backward is present",
		Cannot: "errors that cancel within a row; finite differences cover those",
	},
	"attention/shift-invariance": {
		Tests:  "add a constant vector c to every key: row i of S shifts by scale·(qᵢ·c); O must be unchanged and lse shifted by exactly that constant, with scores near 800, past exp's range",
		Shapes: "scores shifted by up to ~1600",
		Proves: "the row maximum is subtracted before exp (no overflow to Inf/NaN) and lse includes it",
		Cannot: "anything beyond the max subtraction",
	},
	"attention/delta-identity": {
		Tests:  "with P recomputed as exp(S − lse): every row of P sums to 1, and rowsum(dO ⊙ O) = rowsum(P ⊙ dP)",
		Shapes: "[B,Hq,M] row sums",
		Proves: "O and lse are consistent with each other: the identity a fused backward relies on to skip storing P",
		Cannot: "that O is right; only that O and lse agree",
	},
	"attention/accumulates": genericChecks["accumulates"],
	"attention/empty-row": {
		Tests:  "a valid query that sees no key is rejected with an error naming batch and row; a padding query gives zero output and no gradient",
		Shapes: "B=2, M=N=3: query row 2 of batch 1 is in a segment no key belongs to; then a padding query row",
		Proves: "an empty row is an error, not NaN or a silent zero",
		Cannot: "anything about rows that see keys",
	},
	"attention-flash/agrees-with-reference": {
		Tests:  "the fused kernel's O, lse, dQ, dK and dV equal the reference's on seven configurations (masks, GQA, cache offsets)",
		Shapes: "seven configurations of the attention checks",
		Proves: "the tiling, online softmax and recomputation reproduce the reference to rounding",
		Cannot: "more than the reference: a shared mistake passes; the other checks test the kernel on its own",
	},
	"infonce/scale-invariance": {
		Tests:  "scaling one sequence's token vectors by c > 0 leaves the loss unchanged",
		Shapes: "x [B,T,D]",
		Proves: "the L2 normalisation is applied in the forward",
		Cannot: "anything about the backward",
	},
	"infonce/positive-only-mask": {
		Tests:  "a mask hiding every entry but the positives gives loss 0 and zero gradients",
		Shapes: "S [B,B]",
		Proves: "masked entries leave the denominator and the positive is never among them",
		Cannot: "partial masks; finite differences cover those",
	},
	"infonce/uniform-similarity": {
		Tests:  "with all similarities equal, each row's loss is log(number of unmasked entries)",
		Shapes: "S [B,B+K]",
		Proves: "the positive is counted in its own denominator",
		Cannot: "one point of the loss",
	},
	"infonce/ds-sums": {
		Tests:  "each row of ∂L/∂S sums to zero and masked entries get exactly zero",
		Shapes: "dS [B,B+K]",
		Proves: "the softmax minus one-hot structure of the gradient",
		Cannot: "errors that cancel within a row",
	},
	"infonce/scale-direction": {
		Tests:  "Σ_t x_t · dx_t = 0 per sequence: growing a sequence along itself changes nothing",
		Shapes: "x, dx [B,T,D]",
		Proves: "the backward of the normalisation removes the radial component",
		Cannot: "the other directions; finite differences check them",
	},
	"infonce/temperature-sharpens": {
		Tests:  "when every positive is the best match, ∂L/∂τ > 0 and halving τ lowers the loss",
		Shapes: "τ scalar",
		Proves: "the sign of the temperature gradient",
		Cannot: "its size; finite differences check that",
	},
	"infonce/large-masked-scores": {
		Tests:  "with masked similarities far above every unmasked one (a masked document that equals its query, at τ = 1e-4), the loss equals the log-sum-exp over the unmasked entries alone, recomputed here, rows and (when symmetric) positive columns; every gradient is finite",
		Shapes: "S [B,N]; masked entries 1/τ, at least 800 above their rows, two in the positives' columns and one in a hard negative's",
		Proves: "masked entries leave the maximum of every log-sum-exp as well as its sum: a maximum started from a masked entry underflows every exp to 0 and makes the loss −∞",
		Cannot: "which entries should be masked; at moderate scores a maximum taken from a masked entry gives the same value, so only extreme scores tell",
	},
	"infonce/false-negative-mask": {
		Tests:  "the mask built from document keys covers exactly the other copies of each positive, never the positive",
		Shapes: "mask [B,B+K]",
		Proves: "the mask builder's rule",
		Cannot: "whether the caller's keys identify duplicates correctly",
	},
	"listwise/side-scale-invariance": {
		Tests:  "scaling the token vectors of either side by c > 0 (1e-3 to 1e4) leaves the loss unchanged",
		Shapes: "x [G·K,T,D]",
		Proves: "each side is normalised in the forward",
		Cannot: "anything about the backward",
	},
	"listwise/separator-inert": {
		Tests:  "the separator's and padding's token vectors get exactly zero gradient, and redrawing them leaves the loss bit-identical",
		Shapes: "x [G·K,T,D]",
		Proves: "only the query and code tokens are pooled, in the forward and the backward",
		Cannot: "what the encoder does with the separator: attention reads it",
	},
	"listwise/uniform-scores": {
		Tests:  "with every pair's tokens equal, so every score is equal, each group's loss is log(number of valid candidates)",
		Shapes: "s [G,K] with 4 invalid candidates",
		Proves: "the positive counts in its own denominator and invalid candidates do not",
		Cannot: "one point of the loss",
	},
	"listwise/ds-signs": {
		Tests:  "each group's ∂L/∂s sums to zero, is ≤ 0 at the positive, ≥ 0 at negatives and exactly 0 at invalid candidates",
		Shapes: "ds [G,K]",
		Proves: "the softmax-minus-one-hot structure, and that raising the positive's score never raises the loss",
		Cannot: "the sizes of the entries; finite differences check those",
	},
	"listwise/invalid-inert": {
		Tests:  "redrawing the tokens of invalid candidates leaves the loss, dw and every valid candidate's dx bit-identical; their own dx is exactly 0",
		Shapes: "x [G·K,T,D]",
		Proves: "padding candidates are outside the loss, forward and backward",
		Cannot: "whether the caller marks the right candidates invalid",
	},
	"listwise/negatives-unordered": {
		Tests:  "reversing each group's negatives leaves the loss unchanged and permutes ∂L/∂s alike",
		Shapes: "s [G,K]",
		Proves: "only candidate 0 is treated as the positive",
		Cannot: "permutations that move the positive: those change the task",
	},
	"rmsnorm/scale-invariance": {
		Tests:  "with ε = 0, y(c·x) = y(x) for c = 1e-3, 0.5, 7, 1e4",
		Shapes: "x [n,D]",
		Proves: "the forward divides by the root mean square of each row",
		Cannot: "anything about the backward",
	},
	"rmsnorm/dx-orthogonal-x": {
		Tests:  "per row, Σ x ⊙ dx = D·mean(g ⊙ x)·ε/r³ (zero at ε = 0): moving x along itself changes nothing the norm sees",
		Shapes: "x, dx [n,D] at ε = 0, 1e-5, 0.3",
		Proves: "the feedback term −x·mean(g⊙x)/r³ is present with the right coefficient",
		Cannot: "the other D−1 directions of dx; finite differences check them",
	},
	"rope/position-zero-identity": {
		Tests:  "at position 0, y = x bit for bit, both pairings, with and without linear and NTK scaling",
		Shapes: "x [B,H,T,D]",
		Proves: "angles are pos·θ: position 0 rotates nothing",
		Cannot: "any other position",
	},
	"rope/norm-preserving": {
		Tests:  "‖y‖ = ‖x‖ for every head vector within 1e-12 relative, at positions up to 5000",
		Shapes: "6 configurations",
		Proves: "each pair is rotated, not scaled",
		Cannot: "the angle or the pairing: any rotation passes",
	},
	"rope/relative-position": {
		Tests:  "q·k after rotating q at p and k at t equals the same at p+s and t+s (shifts up to 4000)",
		Shapes: "96 shifted pairs",
		Proves: "scores depend on positions only through p − t",
		Cannot: "the frequencies: any angle linear in position passes",
	},
	"rope/backward-inverts-forward": {
		Tests:  "backward applied to forward(x) returns x",
		Shapes: "the fd-elements cases",
		Proves: "the backward is the rotation by −θ, the transpose of the forward's orthogonal map",
		Cannot: "that the forward matches its definition",
	},
	"rope/hf-rotate-half": {
		Tests:  "half pairing equals Hugging Face's x·cos + rotate_half(x)·sin; interleaved equals Meta's complex product on (2k, 2k+1); at explicit per-token positions, with linear and NTK scaling",
		Shapes: "positions [1000 1 4095 7 0 513 2 2]",
		Proves: "the forward matches the two published definitions bit for bit",
		Cannot: "a misreading shared by the definition recomputed here and the implementation",
	},
	"rope/pairings-permutation": {
		Tests:  "interleaved(x) = P⁻¹ half(P x), with P taking features (2k, 2k+1) to (k, k+D/2)",
		Shapes: "D = 10",
		Proves: "the two pairings are the same rotation on permuted features: the permutation of q/k weight rows between checkpoints",
		Cannot: "either pairing against its definition",
	},
	"swiglu/silu-derivative-table": {
		Tests:  "with D = 2, F = 1 and weights selecting each branch, dx = (silu'(a), silu(a)): silu'(0) = 0.5, and the quotient-rule form at a = ±1, 2.5, −3, 6, −12",
		Shapes: "a one-unit MLP",
		Proves: "SiLU's derivative σ(a)(1 + a(1 − σ(a))) is used for the gate",
		Cannot: "other points; finite differences cover the rest",
	},
	"crossentropy/ignore-index": {
		Tests:  "rows with target −100 get exactly zero dlogits and leave the mean: loss and count equal those of the other rows alone",
		Shapes: "7 rows, 3 ignored",
		Proves: "ignored rows are neither counted nor differentiated",
		Cannot: "other ignore values",
	},
	"crossentropy/rows-sum-to-zero": {
		Tests:  "each row of dlogits sums to zero: softmax minus one-hot, both of mass one",
		Shapes: "dlogits [n,V], logits of scale 1 and 8",
		Proves: "the one-hot is subtracted and p normalised",
		Cannot: "errors that cancel within a row",
	},
	"crossentropy/uniform-logits": {
		Tests:  "equal logits give loss log V and dlogits = dloss·(1/V − onehot)/count",
		Shapes: "logits all 0, 3.7, −250",
		Proves: "the loss and gradient at a point known in closed form, the 1/count included",
		Cannot: "other points",
	},
	"linear/forward-definition": {
		Tests:  "y[i,o] = Σ_k x[i,k]·w[o,k] + b[o], recomputed here, with and without bias",
		Shapes: "n=3, In=4, Out=6",
		Proves: "the forward uses w as (Out, In)",
		Cannot: "the backward: finite differences tie it to this forward",
	},
	"embedding/lookup": {
		Tests:  "out[i,:] is a bit-exact copy of table[tokens[i],:], with repeated tokens and the boundary tokens 0 and V−1",
		Shapes: "tokens [n], table [V,D]",
		Proves: "the forward is a lookup",
		Cannot: "the backward: finite differences tie it to this forward",
	},
	"attention-layer/future-invariance": {
		Tests:  "changing later tokens' inputs leaves earlier outputs of the layer bit-identical",
		Shapes: "x [B·T,Dim]",
		Proves: "causality through projections, RoPE and attention",
		Cannot: "the gradients",
	},
	"attention-layer/padding-invariance": {
		Tests:  "padding on the left or inside (empty cache slots) leaves real tokens' outputs unchanged: RoPE positions count real tokens, not array slots",
		Shapes: "2 left pads; 2 empty slots inside",
		Proves: "positions come from the tokens, not from array indices",
		Cannot: "left padding alone (RoPE is relative, a uniform shift is invisible); the inside gap is what tells",
	},
	"attention-layer/position-shift": {
		Tests:  "shifting every position by 1000 leaves the outputs unchanged",
		Shapes: "x [B·T,Dim]",
		Proves: "with RoPE on q and k, scores see only position differences",
		Cannot: "exact in real arithmetic only; rounding of large angles allows 1e-9",
	},
	"attention-layer/gqa-equals-mha": {
		Tests:  "a GQA layer equals an MHA layer whose Wk, Wv rows repeat each KV head over its group; dWk, dWv equal the group sums",
		Shapes: "Wk, Wv [Hkv·Dh,Dim] vs [Hq·Dh,Dim]",
		Proves: "head mapping and gradient accumulation through the projections",
		Cannot: "that contiguous grouping is what a checkpoint expects",
	},
	"block/future-invariance": {
		Tests:  "changing later tokens leaves earlier outputs of the whole block bit-identical",
		Shapes: "x [B·T,Dim]",
		Proves: "causality through norms, attention, MLP and residuals",
		Cannot: "the gradients",
	},
	"decoder/fd-elements": {
		Tests:  "every parameter gradient of a 2-layer GQA model (left padding, two packed documents) equals the 4-point difference of the loss",
		Shapes: "every parameter tensor, HF names",
		Proves: "the whole backward, layer by layer in reverse order, is the derivative of the whole forward",
		Cannot: "that the forward is the right model: shifted labels, positions and the cache are the semantic checks' business",
	},
	"decoder/full-equals-decoding": {
		Tests:  "the full pass, token-by-token decoding and chunked decoding (1, 2+2+2+1, 3+3+1, 5+2, 7, 1+2+3+1) give the same logits (≤ 1e-12)",
		Shapes: "2 rows of 7 tokens",
		Proves: "the KV cache: positions continue after the cache, cached keys are rotated once, chunk masks are offset",
		Cannot: "rows of different lengths (the padding check)",
	},
	"decoder/prefix-unchanged": {
		Tests:  "changing tokens after position t leaves the logits at positions ≤ t bit-identical",
		Shapes: "logits [B·T,V]",
		Proves: "the whole model is causal",
		Cannot: "decoding (compared with the full pass above)",
	},
	"decoder/padding-invariance": {
		Tests:  "left, right or no padding give the same logits for real tokens, in the full pass and in cached decoding of rows of different lengths",
		Shapes: "rows of 3 and 5 tokens",
		Proves: "padding is masked and positions count real tokens, also after a right-padded prefill",
		Cannot: "a uniform shift of positions (invisible to RoPE)",
	},
	"decoder/packing-equals-separate": {
		Tests:  "two documents packed in one row with segment ids give the logits and loss terms of separate runs",
		Shapes: "documents of 3 and 4 tokens",
		Proves: "segments isolate documents through the whole model, loss included",
		Cannot: "segments as the caller assigned them",
	},
	"decoder/batched-generation": {
		Tests:  "greedy generation of 3 prompts of different lengths, left-padded into one batch, equals generating each alone",
		Shapes: "prompts of 3, 5 and 1 tokens, 6 new tokens each",
		Proves: "batching, padding and the cache together do not change what is generated",
		Cannot: "sampling (tested in package model)",
	},
	"decoder/label-shift": {
		Tests:  "the loss is the mean of −log softmax(logits[t])[token t+1] within each document",
		Shapes: "scalar loss over 5 targets",
		Proves: "position t predicts the next token, not itself",
		Cannot: "the logits",
	},
}

// faultNotes add to a fault's one-line Breaks why the checks that catch it
// can, and why the others cannot.
var faultNotes = map[string]string{
	"softmax-no-rowsum":              "The row sum is what makes dS rows sum to zero; without it the backward is no longer the derivative of the forward, so finite differences and ds-rowsum both see it. This is the experiment the design notes suggest first.",
	"mask-dropped":                   "Forward and backward both lose the mask, so the backward is still the exact derivative of the (wrong) forward: finite differences pass. Only properties of the task catch it: future keys get gradient from row 0, the past changes with the future. The lab shows this on purpose.",
	"tril-chunk":                     "tril(ones(M, N)) is a legal M×N mask, so shapes reveal nothing; the chunk's first query sees only the first key. Finite differences fail only because some rows of the test configurations are left with no key at all and the forward errors.",
	"dq-no-scale":                    "Only dQ is off, by the factor √D: the forward is untouched, so only finite differences can see it.",
	"dv-uses-p":                      "P instead of Pᵀ has the right shape only when M = N; the test shapes make the mismatch visible.",
	"gqa-mod-mapping":                "h % Hkv interleaves the groups; used in forward and backward alike it is self-consistent, so only the comparison with repeated heads catches it.",
	"dkdv-overwrite":                 "With Hq/Hkv query heads per KV head, = keeps only the last head's contribution.",
	"padding-keys-visible":           "Consistent in both passes: only the padding and visibility checks see it.",
	"segments-ignored":               "Consistent in both passes: only packing and visibility checks see it.",
	"window-off-by-one":              "One key too many per row, consistent in both passes.",
	"causal-strict":                  "The first token sees nothing, which makes the forward error on most configurations.",
	"softmax-no-max":                 "Mathematically identical; only scores past exp's range (the shift check) overflow.",
	"lse-without-max":                "O is right; only lse is wrong, which a fused backward recomputing P from lse would notice.",
	"infonce-column-max-from-masked": "Subtracting any constant leaves a log-sum-exp unchanged in exact arithmetic, so every check at moderate scores passes, finite differences included. Only a masked score far above the rest shows it: the exps of the unmasked entries underflow to 0 and log 0 = −∞. That is the large-masked-scores check.",
	"grads-assigned":                 "Finite differences run on zeroed buffers, where = and += agree; only the accumulation contract catches it.",
}
