package report

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// ProfilePaths are the CPU profiles bench/run.sh took of chronoq during a
// results file's run: RESULTS-stem.LABEL.SCENARIO-CONNS.pprof.
func ProfilePaths(results string) ([]string, error) {
	stem := strings.TrimSuffix(results, ".json")
	paths, err := filepath.Glob(stem + ".*.pprof")
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	return paths, nil
}

// share is one row of a profile summary: a name and its CPU time.
type share struct {
	name  string
	nanos int64
}

// profileSummary is where a CPU profile's time went: by package and by
// function, counting each sample where it was taken (its leaf frame,
// inlined frames resolved), which is pprof's "flat".
type profileSummary struct {
	total     int64
	packages  []share
	functions []share
}

func summarize(p *profile.Profile) (profileSummary, error) {
	idx := len(p.SampleType) - 1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return profileSummary{}, fmt.Errorf("profile has no sample types")
	}
	byPkg, byFn := map[string]int64{}, map[string]int64{}
	var s profileSummary
	for _, sm := range p.Sample {
		v := sm.Value[idx]
		s.total += v
		fn := "(unknown)"
		if len(sm.Location) > 0 && len(sm.Location[0].Line) > 0 && sm.Location[0].Line[0].Function != nil {
			fn = sm.Location[0].Line[0].Function.Name
		}
		byFn[fn] += v
		byPkg[packageOf(fn)] += v
	}
	s.packages, s.functions = sorted(byPkg), sorted(byFn)
	return s, nil
}

func sorted(m map[string]int64) []share {
	out := make([]share, 0, len(m))
	for k, v := range m {
		out = append(out, share{k, v})
	}
	slices.SortFunc(out, func(a, b share) int {
		return cmp.Or(cmp.Compare(b.nanos, a.nanos), strings.Compare(a.name, b.name))
	})
	return out
}

// packageOf is a Go symbol's import path: everything before the first dot
// after the last slash ("net/http.(*conn).serve" → "net/http").
func packageOf(sym string) string {
	slash := strings.LastIndexByte(sym, '/')
	if dot := strings.IndexByte(sym[slash+1:], '.'); dot >= 0 {
		return sym[:slash+1+dot]
	}
	return sym
}

// packageNotes say what a package's flat time is, where its name does not.
var packageNotes = map[string]string{
	"internal/runtime/syscall": "system calls: the kernel's time",
	"syscall":                  "system calls: the kernel's time",
	"runtime":                  "Go runtime: scheduler, garbage collector, allocation, netpoll",
}

// writeProfile summarizes one profile file: the top packages and the top
// functions, each as a share of the profile's CPU time.
func writeProfile(w io.Writer, path string, top int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	s, err := summarize(p)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if s.total == 0 {
		return fmt.Errorf("%s: no samples", path)
	}
	pct := func(v int64) float64 { return 100 * float64(v) / float64(s.total) }
	fmt.Fprintf(w, "| package (flat) | share of server CPU |\n|---|---:|\n")
	rest := s.total
	for _, sh := range s.packages[:min(top, len(s.packages))] {
		name := "`" + sh.name + "`"
		if note := packageNotes[sh.name]; note != "" {
			name += " (" + note + ")"
		}
		fmt.Fprintf(w, "| %s | %.1f %% |\n", name, pct(sh.nanos))
		rest -= sh.nanos
	}
	if rest > 0 {
		fmt.Fprintf(w, "| everything else | %.1f %% |\n", pct(rest))
	}
	fmt.Fprintf(w, "\n| function (flat) | share of server CPU |\n|---|---:|\n")
	for _, sh := range s.functions[:min(top, len(s.functions))] {
		fmt.Fprintf(w, "| `%s` | %.1f %% |\n", sh.name, pct(sh.nanos))
	}
	return nil
}
