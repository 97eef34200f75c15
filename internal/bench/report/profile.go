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

// profileSummary is where a CPU profile's time went: by the goroutine
// that spent it (named by the function it started in), and by package and
// by function, counting each sample where it was taken (its leaf frame,
// inlined frames resolved), which is pprof's "flat".
type profileSummary struct {
	total, duration int64
	goroutines      []share
	packages        []share
	functions       []share
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
	byG, byPkg, byFn := map[string]int64{}, map[string]int64{}, map[string]int64{}
	s := profileSummary{duration: p.DurationNanos}
	for _, sm := range p.Sample {
		v := sm.Value[idx]
		s.total += v
		fn := "(unknown)"
		if len(sm.Location) > 0 && len(sm.Location[0].Line) > 0 && sm.Location[0].Line[0].Function != nil {
			fn = sm.Location[0].Line[0].Function.Name
		}
		byFn[fn] += v
		byPkg[packageOf(fn)] += v
		byG[entryOf(sm)] += v
	}
	s.goroutines, s.packages, s.functions = sorted(byG), sorted(byPkg), sorted(byFn)
	return s, nil
}

// noGoroutine names the samples whose whole stack is the runtime's: the
// scheduler looking for work, the garbage collector's workers, sysmon.
const noGoroutine = "(the runtime's own: scheduler, GC workers, sysmon)"

// entryOf is the function the sample's goroutine started in: the
// outermost frame that is not the runtime's (a goroutine's stack begins
// in runtime.goexit).
func entryOf(sm *profile.Sample) string {
	for i := len(sm.Location) - 1; i >= 0; i-- {
		lines := sm.Location[i].Line
		for j := len(lines) - 1; j >= 0; j-- {
			// a name without a dot is an assembly routine of the runtime's
			// (gosave_systemstack_switch, memeqbody)
			if f := lines[j].Function; f != nil && strings.Contains(f.Name, ".") && !isRuntime(packageOf(f.Name)) {
				return f.Name
			}
		}
	}
	return noGoroutine
}

func isRuntime(pkg string) bool {
	return pkg == "runtime" || strings.HasPrefix(pkg, "runtime/") || strings.HasPrefix(pkg, "internal/runtime/")
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
	"internal/runtime/syscall/linux": "system calls: the kernel's time",
	"internal/runtime/syscall":       "system calls: the kernel's time",
	"syscall":                        "system calls: the kernel's time",
	"runtime":                        "Go runtime: scheduler, garbage collector, allocation, netpoll",
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
	if s.duration > 0 {
		fmt.Fprintf(w, "%.1f s of CPU in %.1f s.\n\n", float64(s.total)/1e9, float64(s.duration)/1e9)
	}
	table(w, "goroutine (the function it started in)", s.goroutines, s.total, top, nil)
	fmt.Fprintln(w)
	table(w, "package (flat)", s.packages, s.total, top, packageNotes)
	fmt.Fprintln(w)
	table(w, "function (flat)", s.functions, s.total, top, nil)
	return nil
}

// table writes the top rows of shares as a markdown table, with a last
// row for the rest; notes add a word on a name.
func table(w io.Writer, title string, shares []share, total int64, top int, notes map[string]string) {
	fmt.Fprintf(w, "| %s | share of server CPU |\n|---|---:|\n", title)
	rest := total
	for _, sh := range shares[:min(top, len(shares))] {
		name := sh.name
		if name != noGoroutine {
			name = "`" + name + "`"
		}
		if note := notes[sh.name]; note != "" {
			name += " (" + note + ")"
		}
		fmt.Fprintf(w, "| %s | %.1f %% |\n", name, 100*float64(sh.nanos)/float64(total))
		rest -= sh.nanos
	}
	if rest > 0 {
		fmt.Fprintf(w, "| everything else | %.1f %% |\n", 100*float64(rest)/float64(total))
	}
}
