package corpus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTakeSurvey: the sources of the options, in order, surveyed as
// SurveySplit does, with what the survey was taken with.
func TestTakeSurvey(t *testing.T) {
	goroot, dir := testCorpus(t)
	deb, _ := Debian(dir)
	srcs := append([]Source{Std(goroot)}, deb...)
	want, err := SurveySplit(context.Background(), srcs, Options{MaxFileBytes: -1}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := TakeSurvey(context.Background(), SurveyOptions{Std: true, GoRoot: goroot, Dir: dir, Frac: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if sv.Stats != want.Stats || sv.All.Files != want.All.Files || sv.Held.Files != want.Held.Files || len(sv.HeldDocs) != len(want.HeldDocs) {
		t.Errorf("survey %+v, want %+v", sv, want)
	}
	if sv.Debian != 3 || sv.Frac != 0.5 || sv.MaxFileBytes != -1 {
		t.Errorf("Debian %d, Frac %g, MaxFileBytes %d; want 3, 0.5, -1 (no limit)", sv.Debian, sv.Frac, sv.MaxFileBytes)
	}
	sv, err = TakeSurvey(context.Background(), SurveyOptions{Std: true, GoRoot: goroot, MaxFileKB: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sv.Stats.Sources != 1 || sv.Debian != 0 || sv.MaxFileBytes != 2048 {
		t.Errorf("the standard library alone: %d sources, %d Debian, limit %d; want 1, 0, 2048", sv.Stats.Sources, sv.Debian, sv.MaxFileBytes)
	}
	if _, err := TakeSurvey(context.Background(), SurveyOptions{Dir: goroot}); err == nil || !strings.Contains(err.Error(), "holds no unpacked package") {
		t.Errorf("a folder that is not a corpus: %v", err)
	}
}

func TestSurveyOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    SurveyOptions
		want string
	}{
		{SurveyOptions{Std: true, Frac: 0.1, MaxFileKB: 1024}, ""},
		{SurveyOptions{Dir: "x", Frac: 1}, ""},
		{SurveyOptions{Std: true, Frac: 1.5}, "-val-frac 1.5, -max-file-kb 0: want a share in [0, 1] and a size >= 0"},
		{SurveyOptions{Std: true, MaxFileKB: -1}, "-val-frac 0, -max-file-kb -1: want a share in [0, 1] and a size >= 0"},
		{SurveyOptions{Frac: 0.1}, "nothing to read: give -dir, or leave -std on"},
		{SurveyOptions{Std: true, MaxFileKB: 1 << 62}, "-max-file-kb 4611686018427387904: want at most 1073741824 (0: no limit)"}, // its bytes overflowed
		{SurveyOptions{Std: true, MaxFileKB: MaxFileKB}, ""},
	} {
		got := ""
		if err := tc.o.Validate(); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}

func TestSurveyWriteText(t *testing.T) {
	s := &Survey{
		Stats: Stats{Sources: 3, EmptySources: 1, Tests: 4, Generated: 5, Vendored: 6, TestData: 7, Hidden: 8, Large: 9, Empty: 10,
			Duplicates: 2, DupBytes: 1_500_000},
		Debian: 2, Frac: 0.25, MaxFileBytes: 1 << 20, Took: 1234 * time.Millisecond,
	}
	for _, d := range []Document{
		{Path: "std/a/a.go", Unit: "a", Text: make([]byte, 1_000_000)},
		{Path: "debian/x/b/b.go", Unit: "b", Text: make([]byte, 3_000_000)},
		{Path: "debian/x/b/c.go", Unit: "b", Text: make([]byte, 100_000)},
	} {
		s.All.Add(d)
		if d.Unit == "b" {
			s.Held.Add(d)
		}
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `sources: 3 (2 Debian packages); 1 with no file kept
kept: 2 packages, 3 files, 4.1 MB (std 1 files, 1.0 MB; Debian 2 files, 3.1 MB)
skipped: 4 tests, 5 generated, 6 vendored, 7 in testdata, 8 hidden, 9 over 1024 KB, 10 empty
duplicates dropped: 2 files, 1.5 MB
held out at -val-frac 0.25: 1 packages, 2 files, 3.1 MB (std 0 files, 0.0 MB; Debian 2 files, 3.1 MB)
read in 1.2s
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	s.MaxFileBytes = -1 // no limit: named as 0 KB, as -max-file-kb 0 asks for it
	b.Reset()
	s.WriteText(&b)
	if !strings.Contains(b.String(), " 9 over 0 KB,") {
		t.Errorf("without a limit:\n%s", b.String())
	}
}

func TestFetchResultWriteText(t *testing.T) {
	unknown := errors.New("apt-get download: E: Unable to locate package golang-nosuch-dev")
	for _, tc := range []struct {
		name     string
		r        FetchResult
		complete bool
		want     string
	}{
		{"nothing to do", FetchResult{Present: 3, Stale: 2}, true,
			"removed 2 temporaries of an interrupted fetch\nDIR: all 3 packages already fetched; nothing to do\n"},
		{"interrupted before the first package", FetchResult{Present: 3}, false,
			"DIR: fetched 0 packages (0.0 MB of Go source) in 3s; 3 already there; 0 failed\n"},
		{"fetched and failed", FetchResult{Fetched: []string{"golang-a-dev"}, Bytes: 2_500_000, Present: 1,
			Failed: []Failure{{"golang-b-dev", errors.New("dpkg -x: broken")}, {"golang-nosuch-dev", unknown}}}, false,
			"DIR: fetched 1 packages (2.5 MB of Go source) in 3s; 1 already there; 2 failed\n" +
				"  golang-b-dev: dpkg -x: broken\n" +
				"  golang-nosuch-dev: apt-get download: E: Unable to locate package golang-nosuch-dev\n" +
				"apt does not know some packages: check the names, or run apt-get update and fetch again\n"},
	} {
		var b strings.Builder
		if err := tc.r.WriteText(&b, "DIR", 2600*time.Millisecond, tc.complete); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}
