package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Survey is what SurveySplit counts.
type Survey struct {
	Stats        Stats
	All, Held    Tally
	HeldDocs     []Document    // the held-out documents, in order, without their Text
	Debian       int           // of the sources, the Debian packages (named "debian/NAME")
	Frac         float64       // the share held out
	MaxFileBytes int64         // the size limit of the walk (1 MB for Options.MaxFileBytes 0; negative: none)
	Took         time.Duration // the time the walk took
}

// SurveySplit walks srcs as Walk does, without keeping the text, and counts
// all documents and those held out at frac.
func SurveySplit(ctx context.Context, srcs []Source, opt Options, frac float64) (*Survey, error) {
	s := &Survey{Frac: frac, MaxFileBytes: opt.maxFileBytes()}
	for _, src := range srcs {
		if strings.HasPrefix(src.Name, "debian/") {
			s.Debian++
		}
	}
	start := time.Now()
	var err error
	s.Stats, err = Walk(ctx, srcs, opt, func(d Document) error {
		if s.All.Add(d); HeldOut(d.Unit, frac) {
			s.Held.Add(d)
			d.Text = nil
			s.HeldDocs = append(s.HeldDocs, d)
		}
		return nil
	})
	s.Took = time.Since(start)
	return s, err
}

// SurveyOptions say what TakeSurvey reads and how (attnlab corpus stats).
type SurveyOptions struct {
	Std       bool    // read the standard library first
	GoRoot    string  // the Go installation whose standard library Std reads
	Dir       string  // then the packages unpacked in this corpus folder (Fetch); "" none
	MaxFileKB int64   // skip files larger than this many KB; 0: no limit
	Frac      float64 // share of units held out (HeldOut)
}

// MaxFileKB bounds SurveyOptions.MaxFileKB: a terabyte, whose count of
// bytes cannot overflow.
const MaxFileKB = 1 << 30

// Validate checks the options before any work, naming each by its flag of
// attnlab corpus stats.
func (o SurveyOptions) Validate() error {
	switch {
	case !(o.Frac >= 0 && o.Frac <= 1) || o.MaxFileKB < 0:
		return fmt.Errorf("-val-frac %g, -max-file-kb %d: want a share in [0, 1] and a size >= 0", o.Frac, o.MaxFileKB)
	case o.MaxFileKB > MaxFileKB:
		return fmt.Errorf("-max-file-kb %d: want at most %d (0: no limit)", o.MaxFileKB, int64(MaxFileKB))
	case o.Dir == "" && !o.Std:
		return errors.New("nothing to read: give -dir, or leave -std on")
	}
	return nil
}

// TakeSurvey reads the standard library of o.GoRoot (with o.Std) and the
// Debian packages of the corpus folder o.Dir, and counts them as
// SurveySplit does.
func TakeSurvey(ctx context.Context, o SurveyOptions) (*Survey, error) {
	var srcs []Source
	if o.Std {
		srcs = append(srcs, Std(o.GoRoot))
	}
	if o.Dir != "" {
		deb, err := Debian(o.Dir)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, deb...)
	}
	limit := o.MaxFileKB << 10
	if limit == 0 {
		limit = -1 // no limit
	}
	return SurveySplit(ctx, srcs, Options{MaxFileBytes: limit}, o.Frac)
}

// WriteText writes the survey for a reader, as attnlab corpus stats prints
// it: the sources, what was kept (in all and of the standard library and
// the Debian packages), what was skipped by reason, the duplicates, what
// is held out, and the time the walk took.
func (s *Survey) WriteText(w io.Writer) error {
	st := s.Stats
	mb := func(b int64) float64 { return float64(b) / 1e6 }
	counts := func(t Tally) string {
		return fmt.Sprintf("%d packages, %d files, %.1f MB (std %d files, %.1f MB; Debian %d files, %.1f MB)",
			t.Units(), t.Files, mb(t.Bytes), t.StdFiles, mb(t.StdBytes), t.Files-t.StdFiles, mb(t.Bytes-t.StdBytes))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sources: %d (%d Debian packages); %d with no file kept\n", st.Sources, s.Debian, st.EmptySources)
	fmt.Fprintf(&b, "kept: %s\n", counts(s.All))
	// a walk without a size limit names it as 0 KB
	fmt.Fprintf(&b, "skipped: %d tests, %d generated, %d vendored, %d in testdata, %d hidden, %d over %d KB, %d empty\n",
		st.Tests, st.Generated, st.Vendored, st.TestData, st.Hidden, st.Large, max(s.MaxFileBytes, 0)>>10, st.Empty)
	fmt.Fprintf(&b, "duplicates dropped: %d files, %.1f MB\n", st.Duplicates, mb(st.DupBytes))
	fmt.Fprintf(&b, "held out at -val-frac %g: %s\n", s.Frac, counts(s.Held))
	fmt.Fprintf(&b, "read in %s\n", s.Took.Round(100*time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}
