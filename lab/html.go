package lab

import (
	"errors"
	"fmt"
	"html"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/internal/plots"
)

// ErrDirNotEmpty is returned by WriteHTML and CheckReportDir for an output
// folder that exists and holds files, unless they are told to replace it.
var ErrDirNotEmpty = errors.New("exists and is not empty")

// CheckReportDir reports whether dir may receive a report: it must not
// exist, or be an empty directory, or force must be set. Call it before a
// long run to refuse bad input early; WriteHTML checks again.
func CheckReportDir(dir string, force bool) error {
	if dir == "" {
		return errors.New("lab: no output folder given")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("lab: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("lab: %s exists and is not a folder", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if len(ents) > 0 && !force {
		return fmt.Errorf("lab: output folder %s %w (%d entries); choose another or replace it with -force", dir, ErrDirNotEmpty, len(ents))
	}
	return nil
}

// WriteHTML writes the report into the folder dir: index.html, a
// self-contained page (inline CSS and script, no fetch from the network),
// and the PNG images it shows. The page holds no timestamps or durations, so
// the same report gives the same bytes.
//
// The files are written into a temporary folder beside dir, which is renamed
// to dir only when complete: a failed write leaves no partial report, and an
// existing dir is replaced only once the new one is ready. A dir that exists
// and is not empty is refused (ErrDirNotEmpty) unless force is set.
func (r *Report) WriteHTML(dir string, force bool) (err error) {
	if err := CheckReportDir(dir, force); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if parent == abs {
		return fmt.Errorf("lab: cannot write a report over %s", abs)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err = r.writeReportFiles(tmp); err != nil {
		return err
	}
	if err = os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return replaceDir(tmp, abs, force)
}

// replaceDir renames the complete folder tmp to dir. An existing dir is moved
// aside first and removed only after the rename succeeded; on failure it is
// put back.
func replaceDir(tmp, dir string, force bool) error {
	if err := CheckReportDir(dir, force); err != nil { // it may have changed during the run
		return err
	}
	old := ""
	if _, err := os.Stat(dir); err == nil {
		aside, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".old-")
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		// os.Rename will not replace a directory, not even an empty one: free
		// the unique name, then move dir there.
		if err := os.Remove(aside); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := os.Rename(dir, aside); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		old = aside
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return fmt.Errorf("lab: %w", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("lab: report written, but the previous one is left at %s: %w", old, err)
		}
	}
	return nil
}

// writeReportFiles writes index.html and the images into dir.
func (r *Report) writeReportFiles(dir string) error {
	ex, err := newAttentionExample()
	if err != nil {
		return fmt.Errorf("lab: attention example: %w", err)
	}
	rope := newRopeExample()
	if err := drawFigures(dir, r, ex, rope); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	sizes, err := imageSizes(dir)
	if err != nil {
		return err
	}
	page := r.html(ex, rope, sizes)
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(page), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// imageSize is the size at which the page shows an image, in CSS pixels.
type imageSize struct{ W, H int }

// imageSizes reads the size of every PNG of the report. The figures of
// package plots other than the ε sweep are drawn at plots.FigureDPI and shown
// at their size in centimetres, that is scaled by 96/FigureDPI.
func imageSizes(dir string) (map[string]imageSize, error) {
	out := map[string]imageSize{}
	for _, name := range []string{sweepPNG, weightsPNG, gradsPNG, ropePNG} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("lab: %w", err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("lab: %s: %w", name, err)
		}
		scale := 1
		if name != sweepPNG {
			scale = plots.FigureDPI / 96
		}
		out[name] = imageSize{cfg.Width / scale, cfg.Height / scale}
	}
	return out, nil
}

// img returns an <img> element for a figure of the report.
func img(sizes map[string]imageSize, name, alt string) string {
	s := sizes[name]
	return fmt.Sprintf("<img src=\"%s\" width=\"%d\" height=\"%d\" alt=\"%s\">", name, s.W, s.H, esc(alt))
}

// The page. Everything is escaped with esc; the only markup is the page's own.

func esc(s string) string { return html.EscapeString(s) }

// anchor returns an id for an operation, check or fault.
func anchor(parts ...string) string {
	s := strings.Join(parts, "--")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// summaryCounts are the numbers of the summary line.
type summaryCounts struct {
	passed, total, caught, faults, blind int
}

func (r *Report) counts() summaryCounts {
	var s summaryCounts
	for _, op := range r.Ops {
		for _, c := range op.Checks {
			s.total++
			if c.Pass {
				s.passed++
			}
		}
		for _, f := range op.Faults {
			s.faults++
			if f.Caught() {
				s.caught++
			}
			if f.FDBlind {
				s.blind++
			}
		}
	}
	return s
}

const pageCSS = `
*{box-sizing:border-box}
body{margin:0;font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;color:#1d2330;background:#fff}
main{max-width:1180px;margin:0 auto;padding:28px 36px 64px}
h1{font-size:30px;margin:0 0 6px}
h2{font-size:23px;margin:44px 0 10px;padding-bottom:4px;border-bottom:2px solid #e2e6ee}
h3{font-size:18px;margin:30px 0 8px}
h4{font-size:15px;margin:18px 0 4px}
p{max-width:900px}
.lead{font-size:17px;color:#333c4d;max-width:940px}
.verdict{margin:18px 0;padding:14px 18px;border-radius:8px;font-size:17px}
.verdict b{font-size:20px;margin-right:8px}
.ok{background:#e8f6ed;border:1px solid #9ed3b0}
.bad{background:#fdeceb;border:1px solid #e7a29d}
nav{background:#f6f8fb;border:1px solid #e2e6ee;border-radius:8px;padding:10px 18px;margin:14px 0}
nav ol{margin:4px 0;padding-left:22px;columns:2;column-gap:48px}
table{border-collapse:collapse;margin:8px 0 18px;font-size:14px}
th,td{border:1px solid #d9dee7;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f8;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#14692f;font-weight:700}
.fail{color:#b3261e;font-weight:700}
code,.eq,pre{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
.eq{white-space:nowrap;font-size:14px}
.muted{color:#5b6474}
.small{font-size:13px}
.tag{display:inline-block;font-size:11px;line-height:17px;padding:0 7px;border-radius:9px;background:#eef1f6;color:#3a4557;margin-left:6px;white-space:nowrap}
.tag.blind{background:#fff0c7;color:#6b4a00}
.kinds dt{font-weight:700;margin-top:8px}
.kinds dd{margin-left:18px}
.masks{display:flex;flex-wrap:wrap;gap:18px 34px}
.masks figure{margin:0;max-width:520px}
table.mask{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px;margin:4px 0}
table.mask th,table.mask td{text-align:center;min-width:44px;padding:3px 4px}
table.mask th.row{text-align:right}
td.v1{background:#2f6cb0;color:#fff}
td.v0{background:#f5f6f8;color:#a3abb8}
td.padq{background:#fbfbfc;color:#c3c9d2}
figure{margin:12px 0}
figcaption{font-size:13px;color:#4a5363;max-width:620px;margin-top:4px}
.figs{display:flex;flex-wrap:wrap;gap:20px 24px;align-items:flex-start}
.figs figure{flex:1 1 460px;max-width:540px}
img{max-width:100%;height:auto;border:1px solid #eceff4}
details{border:1px solid #d9dee7;border-radius:7px;padding:6px 14px;margin:10px 0;background:#fff}
details[open]{padding-bottom:12px}
summary{cursor:pointer;font-weight:600;padding:3px 0}
details details{background:#fafbfd}
.matrix td{text-align:center;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px;padding:3px 4px;min-width:30px}
.matrix td.name{text-align:left;font-family:inherit;font-size:13px;white-space:nowrap}
.matrix th.vert{vertical-align:bottom;padding:6px 2px;font-weight:500;font-size:12px}
.matrix th.vert span{display:inline-block;writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
.matrix td.caught,.matrix td.errd{white-space:nowrap}
.matrix td.caught{background:#f9dcd9;color:#7d1a14}
.matrix td.errd{background:#ffefcf;color:#7a4b00}
.matrix td.missed{color:#c0c6d0}
.gqa{display:flex;gap:40px;align-items:center;flex-wrap:wrap}
.heads{display:grid;grid-template-columns:repeat(8,54px);gap:6px}
.kvs{display:grid;grid-template-columns:repeat(2,234px);gap:6px}
.box{border-radius:6px;padding:6px 0;text-align:center;font-size:13px;color:#fff}
.kv0{background:#2f6cb0}.kv1{background:#c2571a}
.steps td:first-child{white-space:nowrap}
pre#selftest{background:#111;color:#9f9;padding:8px}
footer{margin-top:48px;font-size:13px;color:#5b6474;border-top:1px solid #e2e6ee;padding-top:10px}
`

// selftestJS runs only when the page is opened with ?selftest: it collects
// script errors, failed loads and console errors, checks that every image
// decoded with a non-zero size, and writes the verdict into <pre
// id=selftest>, where a headless browser's --dump-dom can read it.
const selftestJS = `
(function(){
  if (!/[?&]selftest\b/.test(location.search)) return;
  var errs = [];
  window.addEventListener('error', function(e){
    var t = e.target;
    if (t && t !== window && (t.src || t.href)) errs.push('failed to load ' + (t.src || t.href));
    else errs.push('script error: ' + e.message);
  }, true);
  window.addEventListener('unhandledrejection', function(e){ errs.push('unhandled rejection: ' + e.reason); });
  ['error', 'warn'].forEach(function(k){
    var f = console[k];
    console[k] = function(){ errs.push('console.' + k + ': ' + Array.prototype.join.call(arguments, ' ')); return f.apply(console, arguments); };
  });
  window.addEventListener('load', function(){
    var bad = [], imgs = document.images;
    for (var i = 0; i < imgs.length; i++) {
      var im = imgs[i];
      if (!(im.complete && im.naturalWidth > 0 && im.naturalHeight > 0)) bad.push(im.getAttribute('src'));
    }
    var out = document.getElementById('selftest');
    out.hidden = false;
    var lines = [(errs.length || bad.length) ? 'SELFTEST FAIL' : 'SELFTEST OK', 'images: ' + imgs.length, 'broken images: ' + bad.length];
    bad.forEach(function(s){ lines.push('broken: ' + s); });
    lines.push('errors: ' + errs.length);
    errs.forEach(function(s){ lines.push('error: ' + s); });
    out.textContent = lines.join('\n');
  });
})();
`

// html renders the page.
func (r *Report) html(ex *attentionExample, rope *ropeExample, sizes map[string]imageSize) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	s := r.counts()

	w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	w("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	w("<title>attnlab report: attention gradients, checked by experiment</title>\n")
	w("<link rel=\"icon\" href=\"data:,\">\n<style>%s</style>\n<script>%s</script>\n</head>\n<body>\n<main>\n", pageCSS, selftestJS)

	w("<h1>attnlab report: attention gradients, checked by experiment</h1>\n")
	w("<p class=\"lead\">This page is the output of <code>attnlab lab -html</code>. The lab takes the hand-derived backward passes " +
		"of a Llama-style transformer (attention first, then RoPE, RMSNorm, SwiGLU, the projections, a whole block and a whole decoder) " +
		"and tests each one three ways: against finite differences of its own forward, against properties the task requires " +
		"(what a token may see, what must not change), and against <em>deliberately broken copies</em> of itself, " +
		"each of which some check must catch. The goal is to explain why each gradient flows as it does, to catch a wrong derivative " +
		"by experiment, and to state what each experiment cannot prove.</p>\n")

	cls, word := "ok", "OK"
	if !r.OK() {
		cls, word = "bad", "FAILED"
	}
	w("<div class=\"verdict %s\" id=\"summary\"><b>%s</b> %d/%d checks pass on the correct implementations; "+
		"%d/%d faults caught (%d of them invisible to finite differences); %d operations.</div>\n",
		cls, word, s.passed, s.total, s.caught, s.faults, s.blind, len(r.Ops))

	w("<nav><b>Contents</b><ol>\n")
	for _, item := range [][2]string{
		{"proves", "What the lab proves, and what it cannot"},
		{"glance", "Operations at a glance"},
		{"path", "How the gradient flows through attention"},
		{"masks", "Which keys each query may read"},
		{"weights", "Attention weights and the first-row gradient"},
		{"gqa", "GQA: query heads sharing key/value heads"},
		{"rope", "RoPE: one pair of features across positions"},
		{"sweep", "Choosing ε: the finite-difference sweep"},
		{"ops", "Every operation: checks and negative controls"},
	} {
		w("<li><a href=\"#%s\">%s</a></li>\n", item[0], esc(item[1]))
	}
	w("</ol></nav>\n")

	r.htmlProves(&b)
	r.htmlGlance(&b)
	htmlPath(&b)
	htmlMasks(&b)
	htmlWeights(&b, ex, sizes)
	htmlGQA(&b)
	htmlRope(&b, rope, sizes)
	r.htmlSweep(&b, sizes)
	w("<h2 id=\"ops\">Every operation: checks and negative controls</h2>\n")
	w("<p>Each section lists the checks run on the correct implementation (each must pass) with what it claims, what it measured " +
		"and what a pass cannot prove, then the fault × check matrix: every fault of the operation run through every check. " +
		"A fault is caught when at least one check fails on it. Open a check's row for its long form; " +
		"<code>attnlab explain OP/CHECK</code> prints the same text.</p>\n")
	for x, op := range r.Ops {
		htmlOp(&b, op, x == 0)
	}

	w("<footer>Reproduce with <code>attnlab lab -html DIR</code> (add <code>-force</code> to replace a folder that holds files); "+
		"<code>attnlab explain NAME</code> prints the long form of any operation, check or fault. "+
		"The examples use fixed seeds (figure seed %d) and the page holds no timestamps or durations, so a rerun gives the same bytes.</footer>\n", FigureSeed)
	w("<pre id=\"selftest\" hidden></pre>\n</main>\n</body>\n</html>\n")
	return b.String()
}

func (r *Report) htmlProves(b *strings.Builder) {
	b.WriteString(`<h2 id="proves">What the lab proves, and what it cannot</h2>
<p>Every check uses a scalar loss <code>L = Σ out ⊙ G</code> with a fixed random <code>G</code>, so every output element matters and
<code>G</code> is the upstream gradient. Checks come in three kinds:</p>
<dl class="kinds">
<dt>finite-difference</dt><dd>The backward's gradient equals <code>(L(x+ε) − L(x−ε))/2ε</code> (a 4-point version of it) element by element,
or along random directions, in float64. A pass proves the backward is the derivative of the forward <em>as written</em>.
It cannot prove the forward is right: a forward that reads the wrong keys has a backward that matches it, equally wrong.</dd>
<dt>semantic</dt><dd>Properties of the task that finite differences cannot see: a loss on the first query row gives future keys exactly zero gradient;
changing future tokens leaves earlier outputs unchanged; padding, packing, chunked decoding and grouped heads change nothing they should not.</dd>
<dt>contract</dt><dd>How the functions may be called: backwards add into their gradient buffers (<code>+=</code>, not <code>=</code>);
a query that may see no key at all is an error, not NaN.</dd>
</dl>
<p><b>Negative controls.</b> A registry of faults holds, per operation, copies with one bug each: the row sum dropped from the softmax backward,
a mask removed, a head mapping changed, a position restarted. Each runs through every check of its operation and must be caught by at least one.
Faults marked <span class="tag blind">invisible to finite differences</span> keep forward and backward consistent with each other:
only a semantic or contract check can catch them, and the lab shows that on purpose.</p>
<p><b>Limits.</b> Checks run on small shapes and fixed inputs; finite differences prove agreement with the forward, not its meaning;
a semantic check tests the property it names and no other. Each check below states its own limit.</p>
`)
}

func (r *Report) htmlGlance(b *strings.Builder) {
	b.WriteString("<h2 id=\"glance\">Operations at a glance</h2>\n<table>\n<tr><th>operation</th><th>implementation under test</th>" +
		"<th>checks passed</th><th>faults caught</th><th>of them invisible to finite differences</th></tr>\n")
	for _, op := range r.Ops {
		passed, caught, blind := 0, 0, 0
		for _, c := range op.Checks {
			if c.Pass {
				passed++
			}
		}
		for _, f := range op.Faults {
			if f.Caught() {
				caught++
			}
			if f.FDBlind {
				blind++
			}
		}
		pc, fc := "pass", "pass"
		if passed != len(op.Checks) {
			pc = "fail"
		}
		if caught != len(op.Faults) {
			fc = "fail"
		}
		faultCell := fmt.Sprintf("<span class=\"%s\">%d/%d</span>", fc, caught, len(op.Faults))
		if len(op.Faults) == 0 {
			faultCell = "<span class=\"muted\">none of its own</span>"
		}
		fmt.Fprintf(b, "<tr><td style=\"white-space:nowrap\"><a href=\"#%s\">%s</a></td><td>%s</td><td class=\"num\"><span class=\"%s\">%d/%d</span></td><td class=\"num\">%s</td><td class=\"num\">%d</td></tr>\n",
			anchor("op", op.Op), esc(op.Op), esc(op.Impl), pc, passed, len(op.Checks), faultCell, blind)
	}
	b.WriteString("</table>\n")
}

func htmlSteps(b *strings.Builder, steps []Step) {
	b.WriteString("<table class=\"steps\">\n<tr><th>equation</th><th>shapes</th><th>why this form</th></tr>\n")
	path := ""
	for _, s := range steps {
		if s.Path != "" && s.Path != path {
			fmt.Fprintf(b, "<tr><th colspan=\"3\">%s</th></tr>\n", esc(s.Path))
		}
		path = s.Path
		fmt.Fprintf(b, "<tr><td class=\"eq\">%s</td><td class=\"small\">%s</td><td class=\"small\">%s</td></tr>\n", esc(s.Eq), esc(s.Shape), esc(s.Why))
	}
	b.WriteString("</table>\n")
}

func htmlPath(b *strings.Builder) {
	g := attentionGuide
	fmt.Fprintf(b, "<h2 id=\"path\">How the gradient flows through attention</h2>\n<p>%s</p>\n", esc(g.What))
	b.WriteString("<h3>Forward</h3>\n")
	htmlSteps(b, g.Forward)
	b.WriteString("<h3>Backward: a content path and a weight path</h3>\n" +
		"<p>Given <code>dO</code> (the same shape as <code>O</code>), the gradient splits: the <b>V path</b> carries content back to the values; " +
		"the <b>Q/K path</b> carries the change of the attention weights back through the softmax to queries and keys.</p>\n")
	htmlSteps(b, g.Backward)
	b.WriteString("<ul>\n")
	for _, n := range g.Notes {
		fmt.Fprintf(b, "<li>%s</li>\n", esc(n))
	}
	b.WriteString("</ul>\n<p class=\"small muted\"><code>attnlab explain attention</code> prints this derivation; " +
		"<code>attnlab explain rope</code>, <code>rmsnorm</code>, <code>swiglu</code>, <code>block</code> and <code>decoder</code> do the same for the other operations " +
		"(they are also in each operation's section below).</p>\n")
}

func htmlMasks(b *strings.Builder) {
	b.WriteString("<h2 id=\"masks\">Which keys each query may read</h2>\n" +
		"<p>Rows are queries, columns are keys; <b>1</b> means the query may read the key. Labels give the token's logical position: " +
		"<code>oldP</code> is a cached token, <code>newP</code> a token of the chunk being computed, <code>pad</code> padding. " +
		"The rule decides by positions, validity and segments, never by array indices: " +
		"<code>qvalid ∧ kvalid ∧ same segment ∧ (kpos ≤ qpos) ∧ (qpos − kpos &lt; window)</code>. " +
		"Every table is computed by <code>attention.Config.Visibility</code>, the specification the visibility check probes; " +
		"<code>attnlab mask</code> prints the same tables.</p>\n")
	grids := maskGrids()
	convStart := 5
	for x, g := range grids {
		switch x {
		case 0:
			b.WriteString("<div class=\"masks\">\n")
		case convStart:
			b.WriteString("</div>\n<h3>Three causal conventions at M ≠ N</h3>\n" +
				"<p>When a chunk of M queries follows a cache (M ≠ N), implementations disagree on how to line queries up with keys. " +
				"<b>position</b> (the default here) compares logical positions; <b>bottom-right</b> aligns the last query with the last key by index " +
				"(FlashAttention ≥ 2.1); <b>top-left</b> is <code>tril(ones(M, N))</code>, PyTorch's <code>is_causal</code>: after a cache it hides most of the history, " +
				"and it is still a legal M×N matrix, so no shape check notices. With empty cache slots, bottom-right counts slots where position counts tokens.</p>\n" +
				"<div class=\"masks\">\n")
		}
		htmlMask(b, g)
	}
	b.WriteString("</div>\n")
}

func htmlMask(b *strings.Builder, g maskGrid) {
	c := g.Config
	past := c.N - c.M
	fmt.Fprintf(b, "<figure>\n<h4>%s</h4>\n<table class=\"mask\">\n<tr><th></th>", esc(g.Title))
	for t := range c.N {
		fmt.Fprintf(b, "<th>%s</th>", esc(g.label(t)))
	}
	b.WriteString("</tr>\n")
	if c.KSeg != nil {
		b.WriteString("<tr><th class=\"row\">segment</th>")
		for t := range c.N {
			fmt.Fprintf(b, "<th>%d</th>", c.KSeg[t])
		}
		b.WriteString("</tr>\n")
	}
	for i, row := range c.Visibility(0) {
		fmt.Fprintf(b, "<tr><th class=\"row\">%s</th>", esc(g.label(past+i)))
		for _, v := range row {
			switch {
			case v:
				b.WriteString("<td class=\"v1\">1</td>")
			case !c.QueryValid(0, i):
				b.WriteString("<td class=\"padq\">0</td>")
			default:
				b.WriteString("<td class=\"v0\">0</td>")
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	if g.Caption != "" {
		fmt.Fprintf(b, "<figcaption>%s</figcaption>\n", esc(g.Caption))
	}
	b.WriteString("</figure>\n")
}

func htmlWeights(b *strings.Builder, ex *attentionExample, sizes map[string]imageSize) {
	c := ex.Config
	fmt.Fprintf(b, "<h2 id=\"weights\">Attention weights and the first-row gradient</h2>\n"+
		"<p>A small call of the reference attention: B=%d, Hq=%d query heads sharing Hkv=%d KV head, %d new queries after %d cached keys (N=%d), D=%d, Dv=%d, causal, "+
		"random inputs with seed %d. The loss reads query row 0 only (position %d): <code>dO</code> is zero on every other row.</p>\n",
		c.B, c.Hq, c.Hkv, c.M, c.N-c.M, c.N, c.D, c.Dv, FigureSeed, ex.RowPos)
	b.WriteString("<div class=\"figs\">\n")
	fmt.Fprintf(b, "<figure>%s"+
		"<figcaption>Each row of P is a probability distribution over the keys that query may read; grey cells are masked and hold exactly 0.</figcaption></figure>\n",
		img(sizes, weightsPNG, "Heat map of the attention weights P of head 0"))
	fmt.Fprintf(b, "<figure>%s"+
		"<figcaption>‖dK<sub>j</sub>‖ and ‖dV<sub>j</sub>‖ per key (the shared KV head collects both query heads). "+
		"Keys after position %d are row 0's future: red crosses mark gradients that are exactly zero.</figcaption></figure>\n",
		img(sizes, gradsPNG, "Bar chart of the gradient norm per key"), ex.RowPos)
	b.WriteString("</div>\n")

	b.WriteString("<table>\n<tr><th>key</th>")
	for _, l := range ex.keyLabels() {
		fmt.Fprintf(b, "<th>%s</th>", esc(l))
	}
	b.WriteString("</tr>\n")
	row := func(name string, vals []float64) {
		fmt.Fprintf(b, "<tr><th>%s</th>", name)
		for _, v := range vals {
			if v == 0 {
				b.WriteString("<td class=\"num\"><b>0</b></td>")
			} else {
				fmt.Fprintf(b, "<td class=\"num\">%.3g</td>", v)
			}
		}
		b.WriteString("</tr>\n")
	}
	row("‖dK<sub>j</sub>‖", ex.DK)
	row("‖dV<sub>j</sub>‖", ex.DV)
	row("‖dK<sub>j</sub>‖, fault mask-dropped", ex.FaultDK)
	row("‖dV<sub>j</sub>‖, fault mask-dropped", ex.FaultDV)
	b.WriteString("</table>\n")

	var fut []string
	for _, j := range ex.Future {
		fut = append(fut, fmt.Sprintf("k%d", c.KeyPos(0, j)))
	}
	verdict := "every element of their dK and dV compares == 0: exactly zero, not small"
	if !ex.ExactZero {
		verdict = "<span class=\"fail\">but some element of their dK or dV is not exactly zero: the mask leaks</span>"
	}
	fmt.Fprintf(b, "<p><b>Why exactly zero.</b> With only row 0 in the loss, <code>dV<sub>j</sub> = P<sub>0j</sub> dO<sub>0</sub></code> and "+
		"<code>dK<sub>j</sub> = scale · dS<sub>0j</sub> q<sub>0</sub></code> with <code>dS<sub>0j</sub> = P<sub>0j</sub>(dP<sub>0j</sub> − Σ<sub>k</sub> P<sub>0k</sub> dP<sub>0k</sub>)</code>. "+
		"For a key row 0 may not read, <code>P<sub>0j</sub> = 0</code>, so both vanish. Keys %s are row 0's future; %s. "+
		"With the fault <b>mask-dropped</b> (no mask in forward or backward) the same loss gives them non-zero gradients, yet finite differences pass on that fault, "+
		"because its backward is the exact derivative of its wrong forward. The check <a href=\"#%s\">first-row-grad</a> catches it.</p>\n",
		esc(strings.Join(fut, ", ")), verdict, anchor("check", "attention", "first-row-grad"))
}

func htmlGQA(b *strings.Builder) {
	const hq, hkv = 8, 2
	rows := gqaExample(hq, hkv)
	group := hq / hkv
	b.WriteString("<h2 id=\"gqa\">GQA: query heads sharing key/value heads</h2>\n")
	fmt.Fprintf(b, "<p>With Hq=%d query heads and Hkv=%d key/value heads, each group of Hq/Hkv = %d consecutive query heads reads one KV head: "+
		"<code>kvh = h / (Hq/Hkv)</code> (llama2.c's <code>h / kv_mul</code>, the order of Hugging Face's <code>repeat_kv</code>). "+
		"Sharing K does not make the queries equal: each head still computes its own weights. The mapping below is computed by <code>attention.KVHead</code>.</p>\n",
		hq, hkv, group)
	b.WriteString("<div class=\"gqa\">\n<div>\n<div class=\"heads\">\n")
	for _, r := range rows {
		fmt.Fprintf(b, "<div class=\"box kv%d\">q%d</div>", r.KVHead, r.Head)
	}
	b.WriteString("\n</div>\n<div style=\"text-align:center;margin:6px 0;color:#5b6474\">↓ each query head reads its group's K and V ↓</div>\n<div class=\"kvs\">\n")
	for kv := range hkv {
		fmt.Fprintf(b, "<div class=\"box kv%d\">KV head %d (q%d–q%d)</div>", kv, kv, kv*group, kv*group+group-1)
	}
	b.WriteString("\n</div>\n</div>\n")
	b.WriteString("<table>\n<tr><th>query head h</th>")
	for _, r := range rows {
		fmt.Fprintf(b, "<th>%d</th>", r.Head)
	}
	b.WriteString("</tr>\n<tr><th>KV head h / (Hq/Hkv)</th>")
	for _, r := range rows {
		fmt.Fprintf(b, "<td class=\"num\">%d</td>", r.KVHead)
	}
	b.WriteString("</tr>\n<tr><th>fault gqa-mod-mapping: h % Hkv</th>")
	for _, r := range rows {
		fmt.Fprintf(b, "<td class=\"num\">%d</td>", r.Wrong)
	}
	b.WriteString("</tr>\n</table>\n</div>\n")
	const dh = 128
	fmt.Fprintf(b, "<p><b>Cache size.</b> Per token and layer the KV cache holds 2·Hkv·Dh values instead of 2·Hq·Dh: with Dh=%d, %d instead of %d, "+
		"a ratio of Hkv/Hq = %d/%d = 1/%d. The attention products still serve all %d query heads, and the backward must add each head's dK, dV into its shared head "+
		"(the fault dkdv-overwrite keeps only the last one). The mod mapping <code>h %% Hkv</code> is self-consistent in forward and backward, so finite differences pass it; "+
		"only <a href=\"#%s\">gqa-equals-mha</a>, which compares with physically repeated heads, catches it.</p>\n",
		dh, 2*hkv*dh, 2*hq*dh, hkv, hq, hq/hkv, hq, anchor("check", "attention", "gqa-equals-mha"))
}

func htmlRope(b *strings.Builder, rope *ropeExample, sizes map[string]imageSize) {
	b.WriteString("<h2 id=\"rope\">RoPE: one pair of features across positions</h2>\n")
	fmt.Fprintf(b, "<p>RoPE rotates each pair of features of a query or key by the angle p·θ<sub>k</sub>, θ<sub>k</sub> = base<sup>−2k/D</sup>. "+
		"The figure feeds nn.RoPE (D=%d, base %g) a head whose pair k starts at (r, 0) and plots where it lands at positions 0 to %d. "+
		"Pair 0 turns by 1 radian per position (labels give the position); pair 1 by %.3g; pair 2 by %.3g, so slowly it barely moves: "+
		"high frequencies separate neighbours, low ones distinguish far positions. Every point stays on its circle (a rotation keeps norms) and position 0 is the identity.</p>\n",
		rope.D, rope.Base, ropePositions, rope.Freqs[1], rope.Freqs[2])
	fmt.Fprintf(b, "<figure>%s"+
		"<figcaption>Lines and dots: the half pairing (features k and k+D/2, Hugging Face). Rings: the interleaved pairing (features 2k and 2k+1, Meta), "+
		"fed the same pair; the largest difference between the two is %.1g: pairing changes which features rotate together, not the rotation.</figcaption></figure>\n",
		img(sizes, ropePNG, "Trajectories of rotated feature pairs"), rope.MaxDiff)
	b.WriteString("<table>\n<tr><th>pair k</th>")
	for k := range rope.D / 2 {
		fmt.Fprintf(b, "<th>%d</th>", k)
	}
	b.WriteString("</tr>\n<tr><th>θ<sub>k</sub> (rad per position)</th>")
	for _, f := range rope.Freqs {
		fmt.Fprintf(b, "<td class=\"num\">%.3g</td>", f)
	}
	b.WriteString("</tr>\n<tr><th>half: features</th>")
	for k := range rope.D / 2 {
		fmt.Fprintf(b, "<td class=\"num\">(%d, %d)</td>", k, k+rope.D/2)
	}
	b.WriteString("</tr>\n<tr><th>interleaved: features</th>")
	for k := range rope.D / 2 {
		fmt.Fprintf(b, "<td class=\"num\">(%d, %d)</td>", 2*k, 2*k+1)
	}
	b.WriteString("</tr>\n</table>\n")
	b.WriteString("<p>Because (R(pθ)q)ᵀ(R(tθ)k) = qᵀR((t−p)θ)k, scores see only the difference of positions; and since each rotation is orthogonal, " +
		"the backward rotates the gradient by −θ. A cache whose new token is rotated as if at position 0, or cached keys rotated twice, " +
		"keep every shape right and every norm, yet change the distances: the decoder's checks catch that, finite differences do not.</p>\n")
}

func (r *Report) htmlSweep(b *strings.Builder, sizes map[string]imageSize) {
	b.WriteString("<h2 id=\"sweep\">Choosing ε: the finite-difference sweep</h2>\n")
	fmt.Fprintf(b, "<p>The largest |analytic − numeric| over every element of attention's dQ, dK, dV (%s) as the step ε goes from 10<sup>−1</sup> to 10<sup>−12</sup>. "+
		"For large ε truncation dominates and the error falls like ε² (central) or ε⁴ (4-point); for small ε rounding dominates and it grows like u/ε. "+
		"The checks use the 4-point stencil at ε = 10<sup>−3</sup>, near its best. Loosening tolerances until a test passes is not a substitute.</p>\n",
		esc(r.Sweep.Config))
	fmt.Fprintf(b, "<figure>%s</figure>\n", img(sizes, sweepPNG, "Finite-difference error against the step"))
	if len(r.Sweep.Central) > 0 && len(r.Sweep.Precise) > 0 {
		bc, bp := r.Sweep.Central.Best(), r.Sweep.Precise.Best()
		fmt.Fprintf(b, "<p>Best: central %.1e at ε = %.0e; 4-point %.1e at ε = %.0e. "+
			"A slope is the local order: d log(error) / d log(ε) between neighbouring steps.</p>\n", bc.MaxAbs, bc.Eps, bp.MaxAbs, bp.Eps)
	}
	b.WriteString("<details><summary>The numbers of the sweep</summary>\n<table>\n<tr><th>ε</th><th>central</th><th>slope</th><th>4-point</th><th>slope</th></tr>\n")
	cs, ps := r.Sweep.Central.Slopes(), r.Sweep.Precise.Slopes()
	for i, row := range r.Sweep.Central {
		pm := math.NaN()
		if i < len(r.Sweep.Precise) {
			pm = r.Sweep.Precise[i].MaxAbs
		}
		fmt.Fprintf(b, "<tr><td class=\"num\">%.1e</td><td class=\"num\">%.1e</td><td class=\"num\">%s</td><td class=\"num\">%.1e</td><td class=\"num\">%s</td></tr>\n",
			row.Eps, row.MaxAbs, slope(cs, i), pm, slope(ps, i))
	}
	b.WriteString("</table>\n</details>\n")
}

// fmtErr formats a measured error for a matrix cell.
func fmtErr(e float64) string {
	switch {
	case math.IsInf(e, 0) || math.IsNaN(e):
		return "∞"
	case e == 0:
		return ""
	}
	// 3e-01 → 3e-1, 1e+00 → 1e0: narrow cells
	m, x, _ := strings.Cut(fmt.Sprintf("%.0e", e), "e")
	sign := ""
	if strings.HasPrefix(x, "-") {
		sign = "-"
	}
	x = strings.TrimLeft(x, "+-0")
	if x == "" {
		x = "0"
	}
	return m + "e" + sign + x
}

func htmlOp(b *strings.Builder, op OpReport, open bool) {
	passed := 0
	for _, c := range op.Checks {
		if c.Pass {
			passed++
		}
	}
	caught := 0
	for _, f := range op.Faults {
		if f.Caught() {
			caught++
		}
	}
	openAttr := ""
	if open {
		openAttr = " open"
	}
	fmt.Fprintf(b, "<details id=\"%s\"%s>\n<summary>%s <span class=\"muted\">— %s</span> <span class=\"tag\">%d/%d checks pass</span>",
		anchor("op", op.Op), openAttr, esc(op.Op), esc(op.Impl), passed, len(op.Checks))
	if len(op.Faults) > 0 {
		fmt.Fprintf(b, "<span class=\"tag\">%d/%d faults caught</span>", caught, len(op.Faults))
	}
	b.WriteString("</summary>\n")

	if g, ok := OpGuideFor(op.Op); ok {
		fmt.Fprintf(b, "<p>%s</p>\n<details><summary>The gradient path of %s</summary>\n<h4>Forward</h4>\n", esc(g.What), esc(op.Op))
		htmlSteps(b, g.Forward)
		b.WriteString("<h4>Backward</h4>\n")
		htmlSteps(b, g.Backward)
		if len(g.Notes) > 0 {
			b.WriteString("<ul>\n")
			for _, n := range g.Notes {
				fmt.Fprintf(b, "<li>%s</li>\n", esc(n))
			}
			b.WriteString("</ul>\n")
		}
		b.WriteString("</details>\n")
	}

	fmt.Fprintf(b, "<h4>Checks on the correct implementation (%d)</h4>\n", len(op.Checks))
	b.WriteString("<table>\n<tr><th></th><th>check</th><th>claim</th><th>measured</th><th>limit: what a pass cannot prove</th></tr>\n")
	for _, c := range op.Checks {
		v := "<span class=\"pass\">PASS</span>"
		if !c.Pass {
			v = "<span class=\"fail\">FAIL</span>"
		}
		fmt.Fprintf(b, "<tr id=\"%s\"><td>%s</td><td><b>%s</b><br><span class=\"tag\">%s</span></td><td class=\"small\">%s",
			anchor("check", op.Op, c.Check), v, esc(c.Check), esc(string(c.Kind)), esc(c.Claim))
		if g, ok := CheckGuideFor(op.Op, c.Check); ok {
			fmt.Fprintf(b, "<details><summary>long form</summary><p><b>Tests:</b> %s</p><p><b>Shapes:</b> %s</p><p><b>A pass proves:</b> %s</p><p><b>A pass cannot prove:</b> %s</p></details>",
				esc(g.Tests), esc(g.Shapes), esc(g.Proves), esc(g.Cannot))
		}
		fmt.Fprintf(b, "</td><td class=\"small\">%s</td><td class=\"small\">%s</td></tr>\n", esc(c.Detail), esc(c.Limit))
	}
	b.WriteString("</table>\n")

	if len(op.Faults) == 0 {
		b.WriteString("<p class=\"muted\">No faults of its own: the checks above are the ones that catch every fault of the reference attention.</p>\n</details>\n")
		return
	}
	htmlMatrix(b, op)
	b.WriteString("</details>\n")
}

func htmlMatrix(b *strings.Builder, op OpReport) {
	fmt.Fprintf(b, "<h4>Negative controls: fault × check (%d faults)</h4>\n", len(op.Faults))
	b.WriteString("<p class=\"small\">A red cell is a check that caught the fault by measurement, with the error it measured where there is one " +
		"(∞: NaN or overflow); <b>E</b>: caught because the broken implementation returned an error or panicked; · : the check passed on the fault. " +
		"Hover a cell for what the check measured; the list below gives it in full.</p>\n")
	kinds := map[string]checks.Kind{}
	for _, c := range op.Checks {
		kinds[c.Check] = c.Kind
	}
	b.WriteString("<div style=\"overflow-x:auto\"><table class=\"matrix\">\n<tr><th>fault</th>")
	for _, res := range op.Faults[0].Results {
		fmt.Fprintf(b, "<th class=\"vert\"><span>%s</span></th>", esc(res.Check))
	}
	b.WriteString("<th>caught by</th><th>what it breaks</th></tr>\n")
	for _, f := range op.Faults {
		fmt.Fprintf(b, "<tr><td class=\"name\"><a href=\"#%s\">%s</a>", anchor("fault", op.Op, f.Name), esc(f.Name))
		if f.FDBlind {
			b.WriteString("<br><span class=\"tag blind\">invisible to finite differences</span>")
		}
		b.WriteString("</td>")
		for _, res := range f.Results {
			title := esc(res.Check + ": " + res.Detail)
			switch {
			case res.Errored:
				fmt.Fprintf(b, "<td class=\"errd\" title=\"%s\">E</td>", title)
			case !res.Pass:
				fmt.Fprintf(b, "<td class=\"caught\" title=\"%s\">✗<br>%s</td>", title, fmtErr(res.Error))
			default:
				fmt.Fprintf(b, "<td class=\"missed\" title=\"%s\">·</td>", title)
			}
		}
		by := fmt.Sprintf("%d", len(f.CaughtBy))
		if !f.Caught() {
			by = "<span class=\"fail\">ESCAPED</span>"
		}
		fmt.Fprintf(b, "<td class=\"num\">%s</td><td class=\"small\" style=\"text-align:left;font-family:inherit\">%s</td></tr>\n", by, esc(f.Breaks))
	}
	b.WriteString("</table></div>\n")

	b.WriteString("<details><summary>Each fault in detail: the checks that caught it and what they measured</summary>\n")
	for _, f := range op.Faults {
		fmt.Fprintf(b, "<h4 id=\"%s\">%s</h4>\n<p>%s", anchor("fault", op.Op, f.Name), esc(f.Name), esc(explainSentence(f.Breaks)))
		if note := FaultNote(f.Name); note != "" {
			fmt.Fprintf(b, " %s", esc(note))
		}
		b.WriteString("</p>\n")
		switch {
		case !f.Caught():
			b.WriteString("<p class=\"fail\">ESCAPED: no check caught it.</p>\n")
		case f.Kinds[checks.Gradient] > 0:
			b.WriteString("<p class=\"small muted\">Finite differences measure it: the backward is no longer the derivative of the forward.</p>\n")
		case f.FDErrored:
			b.WriteString("<p class=\"small muted\">Finite differences fail only because the forward returns an error; they do not measure the bug.</p>\n")
		default:
			b.WriteString("<p class=\"small muted\">Finite differences pass: only the semantic and contract checks see it.</p>\n")
		}
		b.WriteString("<ul class=\"small\">\n")
		for _, res := range f.Results {
			if res.Pass {
				continue
			}
			how := "caught"
			if res.Errored {
				how = "caught (error)"
			}
			fmt.Fprintf(b, "<li><b>%s</b> <span class=\"tag\">%s</span> %s: %s</li>\n", esc(res.Check), esc(string(kinds[res.Check])), how, esc(res.Detail))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</details>\n")
}
