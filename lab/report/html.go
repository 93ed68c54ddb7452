package report

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"html/template"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/lab"
)

// ErrDirNotEmpty is returned by HTML and CheckDir for an output folder that
// exists and holds files, unless they are told to replace it.
var ErrDirNotEmpty = errors.New("exists and is not empty")

// CheckDir reports whether dir may receive a report: it must not exist, or
// be an empty directory, or force must be set. Call it before a long run to
// refuse bad input early; HTML checks again.
func CheckDir(dir string, force bool) error {
	if dir == "" {
		return errors.New("report: no output folder given")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("report: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("report: %s exists and is not a folder", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if len(ents) > 0 && !force {
		return fmt.Errorf("report: output folder %s %w (%d entries); choose another or replace it with -force", dir, ErrDirNotEmpty, len(ents))
	}
	return nil
}

// HTML writes the report r into the folder dir: index.html, a
// self-contained page (inline CSS and script, no fetch from the network),
// and the PNG images it shows. The page is rendered by html/template from
// the embedded assets/report.html, style.css and selftest.js. It holds no
// timestamps or durations, so the same report gives the same bytes.
//
// The files are written into a temporary folder beside dir, which is renamed
// to dir only when complete: a failed write leaves no partial report, and an
// existing dir is replaced only once the new one is ready. A dir that exists
// and is not empty is refused (ErrDirNotEmpty) unless force is set.
func HTML(r *lab.Report, dir string, force bool) (err error) {
	if err := CheckDir(dir, force); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if filepath.Dir(abs) == abs {
		return fmt.Errorf("report: cannot write a report over %s", abs)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return atomicfile.ReplaceDir(dir, func(tmp string) error {
		if err := writeReportFiles(r, tmp); err != nil {
			return err
		}
		return CheckDir(dir, force) // it may have changed during the run
	})
}

// writeReportFiles writes index.html and the images into dir.
func writeReportFiles(r *lab.Report, dir string) error {
	ex, err := newAttentionExample()
	if err != nil {
		return fmt.Errorf("report: attention example: %w", err)
	}
	rope := newRopeExample()
	if err := drawFigures(dir, r, ex, rope); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	sizes, err := imageSizes(dir)
	if err != nil {
		return err
	}
	page, err := render(r, ex, rope, sizes)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), page, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
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
			return nil, fmt.Errorf("report: %w", err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", name, err)
		}
		scale := 1
		if name != sweepPNG {
			scale = plots.FigureDPI / 96
		}
		out[name] = imageSize{cfg.Width / scale, cfg.Height / scale}
	}
	return out, nil
}

//go:embed assets
var assets embed.FS

// pageTemplate is the template of index.html.
var pageTemplate = template.Must(template.New("report.html").ParseFS(assets, "assets/report.html"))

func asset(name string) string {
	data, err := assets.ReadFile("assets/" + name)
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(data)
}

// render executes the page template on the views of r and the examples.
func render(r *lab.Report, ex *attentionExample, rope *ropeExample, sizes map[string]imageSize) ([]byte, error) {
	attn, ok := lab.Find("attention")
	if !ok {
		return nil, errors.New("the registry has no attention")
	}
	v := pageView{
		CSS: template.CSS(asset("style.css")), JS: template.JS(asset("selftest.js")),
		OK: r.OK(), Counts: r.Counts(), FigureSeed: FigureSeed,
		Attention: guideView(attn.Info().Guide),
		Weights:   weightsOf(ex, sizes), GQA: gqaOf(8, 2), Rope: ropeOf(rope, sizes), Sweep: sweepOf(r.Sweep, sizes),
	}
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
		v.Contents = append(v.Contents, contentsItem{item[0], item[1]})
	}
	grids := maskGrids()
	for x, g := range grids {
		if x < conventionGrids {
			v.Masks = append(v.Masks, maskOf(g))
		} else {
			v.Conventions = append(v.Conventions, maskOf(g))
		}
	}
	for x, op := range r.Ops {
		v.Ops = append(v.Ops, opOf(op, x == 0))
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// The views the template reads.
type (
	pageView struct {
		CSS         template.CSS
		JS          template.JS
		OK          bool
		Counts      lab.Counts
		Contents    []contentsItem
		Attention   guide
		Masks       []maskView
		Conventions []maskView
		Weights     weightsView
		GQA         gqaView
		Rope        ropeView
		Sweep       sweepView
		Ops         []opView
		FigureSeed  int
	}
	contentsItem struct{ ID, Title string }
	guide        struct {
		What              string
		Forward, Backward []stepView
		Notes             []string
	}
	stepView struct {
		checks.Step
		NewPath bool // the first step of its path
	}
	maskView struct {
		Title, Caption string
		Keys           []string
		Segments       []int
		Rows           []maskRow
	}
	maskRow struct {
		Label string
		Cells []string // v1 visible, v0 hidden, padq a padding query
	}
	weightsView struct {
		C                  *attention.Config
		Past, Seed, RowPos int
		Heatmap, Bars      template.HTML
		Keys               []string
		Rows               []weightsRow
		Future             string
		ExactZero          bool
		FirstRowAnchor     string
	}
	weightsRow struct {
		Name   template.HTML
		Values []string
	}
	gqaView struct {
		Hq, Hkv, Group, Dh, Small, Big int
		Rows                           []gqaRow
		KV                             []gqaKV
		Anchor                         string
	}
	gqaKV    struct{ Index, First, Last int }
	ropeView struct {
		D, Positions          int
		Base                  float64
		Freq1, Freq2, MaxDiff string
		Image                 template.HTML
		Pairs                 []ropePair
	}
	ropePair struct {
		K, Half, I0, I1 int
		Freq            string
	}
	sweepView struct {
		Config string
		Image  template.HTML
		Best   string
		Rows   [][5]string
	}
	opView struct {
		Anchor, Op, Impl         string
		Open, AllPass, AllCaught bool
		Passed, Caught, Blind    int
		Guide                    guide
		Checks                   []checkView
		Faults                   []faultView
	}
	checkView struct {
		lab.CheckOutcome
		Anchor string
		Long   checks.Long
	}
	faultView struct {
		lab.FaultOutcome
		Anchor, Sentence, Note string
		Caught, ByFD           bool
		Cells                  []cellView
		Catches                []catchView
	}
	cellView  struct{ Mark, Title, Error string }
	catchView struct {
		Check, How, Detail string
		Kind               checks.Kind
	}
)

// conventionGrids is the number of mask grids before the causal
// conventions' own.
const conventionGrids = 5

func guideView(g checks.OpGuide) guide {
	steps := func(ss []checks.Step) []stepView {
		var out []stepView
		path := ""
		for _, s := range ss {
			out = append(out, stepView{s, s.Path != "" && s.Path != path})
			path = s.Path
		}
		return out
	}
	return guide{What: g.What, Forward: steps(g.Forward), Backward: steps(g.Backward), Notes: g.Notes}
}

func maskOf(g maskGrid) maskView {
	c := g.Config
	past := c.N - c.M
	v := maskView{Title: g.Title, Caption: g.Caption}
	for t := range c.N {
		v.Keys = append(v.Keys, g.label(t))
	}
	if c.KSeg != nil {
		v.Segments = c.KSeg[:c.N]
	}
	for i, row := range c.Visibility(0) {
		r := maskRow{Label: g.label(past + i)}
		for _, vis := range row {
			switch {
			case vis:
				r.Cells = append(r.Cells, "v1")
			case !c.QueryValid(0, i):
				r.Cells = append(r.Cells, "padq")
			default:
				r.Cells = append(r.Cells, "v0")
			}
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}

// img returns an <img> element for a figure of the report.
func img(sizes map[string]imageSize, name, alt string) template.HTML {
	s := sizes[name]
	return template.HTML(fmt.Sprintf("<img src=\"%s\" width=\"%d\" height=\"%d\" alt=\"%s\">", name, s.W, s.H, template.HTMLEscapeString(alt)))
}

func weightsOf(ex *attentionExample, sizes map[string]imageSize) weightsView {
	c := ex.Config
	v := weightsView{C: c, Past: c.N - c.M, Seed: FigureSeed, RowPos: ex.RowPos, ExactZero: ex.ExactZero,
		Heatmap:        img(sizes, weightsPNG, "Heat map of the attention weights P of head 0"),
		Bars:           img(sizes, gradsPNG, "Bar chart of the gradient norm per key"),
		Keys:           ex.keyLabels(),
		FirstRowAnchor: anchor("check", "attention", "first-row-grad")}
	row := func(name template.HTML, vals []float64) {
		r := weightsRow{Name: name}
		for _, x := range vals {
			r.Values = append(r.Values, fmt.Sprintf("%.3g", x))
		}
		v.Rows = append(v.Rows, r)
	}
	row("‖dK<sub>j</sub>‖", ex.DK)
	row("‖dV<sub>j</sub>‖", ex.DV)
	row("‖dK<sub>j</sub>‖, fault mask-dropped", ex.FaultDK)
	row("‖dV<sub>j</sub>‖, fault mask-dropped", ex.FaultDV)
	var fut []string
	for _, j := range ex.Future {
		fut = append(fut, fmt.Sprintf("k%d", c.KeyPos(0, j)))
	}
	v.Future = strings.Join(fut, ", ")
	return v
}

func gqaOf(hq, hkv int) gqaView {
	const dh = 128
	v := gqaView{Hq: hq, Hkv: hkv, Group: hq / hkv, Dh: dh, Small: 2 * hkv * dh, Big: 2 * hq * dh,
		Rows: gqaExample(hq, hkv), Anchor: anchor("check", "attention", "gqa-equals-mha")}
	for kv := range hkv {
		v.KV = append(v.KV, gqaKV{kv, kv * v.Group, kv*v.Group + v.Group - 1})
	}
	return v
}

func ropeOf(rope *ropeExample, sizes map[string]imageSize) ropeView {
	v := ropeView{D: rope.D, Positions: ropePositions, Base: rope.Base,
		Freq1: fmt.Sprintf("%.3g", rope.Freqs[1]), Freq2: fmt.Sprintf("%.3g", rope.Freqs[2]), MaxDiff: fmt.Sprintf("%.1g", rope.MaxDiff),
		Image: img(sizes, ropePNG, "Trajectories of rotated feature pairs")}
	for k, f := range rope.Freqs {
		v.Pairs = append(v.Pairs, ropePair{K: k, Half: k + rope.D/2, I0: 2 * k, I1: 2*k + 1, Freq: fmt.Sprintf("%.3g", f)})
	}
	return v
}

func sweepOf(s checks.Sweep, sizes map[string]imageSize) sweepView {
	v := sweepView{Config: s.Config, Image: img(sizes, sweepPNG, "Finite-difference error against the step")}
	if len(s.Central) > 0 && len(s.Precise) > 0 {
		bc, bp := s.Central.Best(), s.Precise.Best()
		v.Best = fmt.Sprintf("Best: central %.1e at ε = %.0e; 4-point %.1e at ε = %.0e.", bc.MaxAbs, bc.Eps, bp.MaxAbs, bp.Eps)
	}
	cs, ps := s.Central.Slopes(), s.Precise.Slopes()
	for i, row := range s.Central {
		pm := math.NaN()
		if i < len(s.Precise) {
			pm = s.Precise[i].MaxAbs
		}
		v.Rows = append(v.Rows, [5]string{fmt.Sprintf("%.1e", row.Eps), fmt.Sprintf("%.1e", row.MaxAbs), slope(cs, i), fmt.Sprintf("%.1e", pm), slope(ps, i)})
	}
	return v
}

func opOf(op lab.OpReport, open bool) opView {
	info := lab.OpInfo{}
	if r, ok := lab.Find(op.Op); ok {
		info = r.Info()
	}
	v := opView{Anchor: anchor("op", op.Op), Op: op.Op, Impl: op.Impl, Open: open, Guide: guideView(info.Guide)}
	kinds := map[string]checks.Kind{}
	for _, c := range op.Checks {
		kinds[c.Check] = c.Kind
		if c.Pass {
			v.Passed++
		}
		long, _ := info.Check(c.Check)
		v.Checks = append(v.Checks, checkView{CheckOutcome: c, Anchor: anchor("check", op.Op, c.Check), Long: long.Long})
	}
	for _, f := range op.Faults {
		fi, _ := info.Fault(f.Name)
		fv := faultView{FaultOutcome: f, Anchor: anchor("fault", op.Op, f.Name), Sentence: explainSentence(f.Breaks), Note: fi.Note,
			Caught: f.Caught(), ByFD: f.Kinds[checks.Gradient] > 0}
		for _, res := range f.Results {
			cell := cellView{Mark: ".", Title: res.Check + ": " + res.Detail}
			switch {
			case res.Errored:
				cell.Mark = "E"
			case !res.Pass:
				cell.Mark, cell.Error = "x", fmtErr(res.Error)
			}
			fv.Cells = append(fv.Cells, cell)
			if !res.Pass {
				how := "caught"
				if res.Errored {
					how = "caught (error)"
				}
				fv.Catches = append(fv.Catches, catchView{Check: res.Check, How: how, Detail: res.Detail, Kind: kinds[res.Check]})
			}
		}
		if fv.Caught {
			v.Caught++
		}
		if f.FDBlind {
			v.Blind++
		}
		v.Faults = append(v.Faults, fv)
	}
	v.AllPass, v.AllCaught = v.Passed == len(op.Checks), v.Caught == len(op.Faults)
	return v
}

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
