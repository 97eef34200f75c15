package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// The generated part of docs/benchmarks.md lies between these two lines;
// "chronoq-bench report" replaces what is between them and nothing else.
const (
	beginMarker = "<!-- BEGIN chronoq-bench report: written by bench/run.sh; edits between these lines are overwritten -->"
	endMarker   = "<!-- END chronoq-bench report -->"
)

// SectionConfig names what the generated section is made of.
type SectionConfig struct {
	Results string   // the run reported (a results file of bench/run.sh)
	Before  string   // the run it is compared with; empty: no comparison
	Commit  string   // what the run's server was built from
	Plots   []string // the plots' paths, relative to the document
}

// WriteSection writes the generated section: the run's provenance, the
// speed goals judged on it, its medians, the comparison with Before, the
// summaries of the CPU profiles taken during it, and its plots.
func WriteSection(w io.Writer, cfg SectionConfig) error {
	after, err := LoadResults(cfg.Results)
	if err != nil {
		return err
	}
	if len(after) == 0 {
		return fmt.Errorf("%s: no results", cfg.Results)
	}
	stem := strings.TrimSuffix(cfg.Results, ".json")
	fmt.Fprintf(w, "%s\n\n## Latest run\n\n", beginMarker)
	fmt.Fprintf(w, "`bench/run.sh`")
	if cfg.Commit != "" {
		fmt.Fprintf(w, " on `%s`", cfg.Commit)
	}
	if span, err := readLoad(stem + ".load.txt"); err == nil {
		fmt.Fprintf(w, ", %s, load average (1 min) %.1f–%.1f at the repetitions' starts", span.when(), span.lo, span.hi)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fmt.Fprintf(w, ", %d runs (`%s.*`).", len(after), stem)
	if na, err := os.ReadFile(stem + ".na.txt"); err == nil && len(bytes.TrimSpace(na)) > 0 {
		fmt.Fprintf(w, " Cells that could not run: `%s.na.txt`.", stem)
	}
	fmt.Fprintf(w, " The machine is shared: compare the same-run ratios, not absolute rates across runs.")
	m := group(after)
	if r, ok := medianOf(m, "put", tMemory, rate); ok {
		fmt.Fprintf(w, " Its speed in this run, by the yardstick of in-memory beanstalkd's puts at %d connections: %.0f/s", goalConns, r)
		if c, ok := medianOf(m, "put", tMemory, cpuPer); ok {
			fmt.Fprintf(w, ", %.1f µs of server CPU each", c)
		}
		fmt.Fprint(w, ".")
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintf(w, "### Against the speed goals\n\n")
	writeGoals(w, speedGoals(after))

	fmt.Fprintf(w, "\n### Medians\n\n")
	WriteMarkdown(w, after, tHTTP)

	if cfg.Before != "" {
		before, err := LoadResults(cfg.Before)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n### Before and after\n\nBefore is `%s`", cfg.Before)
		if span, err := readLoad(strings.TrimSuffix(cfg.Before, ".json") + ".load.txt"); err == nil {
			fmt.Fprintf(w, " (%s)", span.when())
		}
		fmt.Fprintf(w, "; a server CPU figure is n/a where that run did not measure it.\n\n")
		writeBeforeAfter(w, before, after)
	}

	profiles, err := ProfilePaths(cfg.Results)
	if err != nil {
		return err
	}
	if len(profiles) > 0 {
		fmt.Fprintf(w, "\n### Where chronoq's CPU goes\n\nCPU profiles of the server (admin port, `/debug/pprof/profile`) during the first repetition of each cell named, in `%s.*.pprof` (`go tool pprof` reads them).\n", stem)
	}
	for _, p := range profiles {
		fmt.Fprintf(w, "\n#### %s\n\n", profileTitle(stem, p))
		// a profile the server did not answer must not cost the run's report
		if err := writeProfile(w, p, 10); err != nil {
			fmt.Fprintf(w, "Not summarized: %v\n", err)
		}
	}

	if len(cfg.Plots) > 0 {
		fmt.Fprintf(w, "\n### Plots\n\n")
		for _, p := range cfg.Plots {
			fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(path.Base(p), ".png"), p)
		}
	} else {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, endMarker)
	return nil
}

// profileTitle reads "chronoq-http, put, 64 connections" out of
// STEM.chronoq-http.put-64.pprof.
func profileTitle(stem, path string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(path, stem+"."), ".pprof")
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return name
	}
	label, cell := name[:dot], name[dot+1:]
	dash := strings.LastIndexByte(cell, '-')
	if dash < 0 {
		return label + ", " + cell
	}
	return fmt.Sprintf("%s, %s, %s connections", label, cell[:dash], cell[dash+1:])
}

// loadSpan is what a run's .load.txt says: when the run began and ended
// and the range of the 1-minute load average at its repetitions' starts.
type loadSpan struct {
	first, last time.Time
	lo, hi      float64
}

func (s loadSpan) when() string {
	const day, clock = "2006-01-02 15:04", "15:04"
	return fmt.Sprintf("%s–%s UTC", s.first.UTC().Format(day), s.last.UTC().Format(clock))
}

// readLoad parses lines "2026-11-27T12:12:00Z load 0.40 1.20 3.00 what".
func readLoad(path string) (loadSpan, error) {
	f, err := os.Open(path)
	if err != nil {
		return loadSpan{}, err
	}
	defer f.Close()
	s := loadSpan{lo: math.Inf(1), hi: math.Inf(-1)}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 3 || fields[1] != "load" {
			return loadSpan{}, fmt.Errorf("%s:%d: want \"TIME load L1 L5 L15 ...\"", path, n)
		}
		t, err := time.Parse(time.RFC3339, fields[0])
		if err != nil {
			return loadSpan{}, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		l, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			return loadSpan{}, fmt.Errorf("%s:%d: load: %w", path, n, err)
		}
		if s.first.IsZero() {
			s.first = t
		}
		s.last = t
		s.lo, s.hi = math.Min(s.lo, l), math.Max(s.hi, l)
	}
	if err := sc.Err(); err != nil {
		return loadSpan{}, fmt.Errorf("%s: %w", path, err)
	}
	if s.first.IsZero() {
		return loadSpan{}, fmt.Errorf("%s: no lines", path)
	}
	return s, nil
}

// Splice answers doc with the text between its marker lines (markers
// included) replaced by section, which must carry the markers itself.
func Splice(doc, section []byte) ([]byte, error) {
	b := bytes.Index(doc, []byte(beginMarker))
	e := bytes.Index(doc, []byte(endMarker))
	switch {
	case b < 0 || e < 0:
		return nil, fmt.Errorf("the document lacks the marker lines %q and %q: put them where the report goes", beginMarker, endMarker)
	case e < b:
		return nil, errors.New("the document's end marker comes before its begin marker")
	case bytes.Count(doc, []byte(beginMarker)) > 1 || bytes.Count(doc, []byte(endMarker)) > 1:
		return nil, errors.New("the document has more than one pair of report markers")
	}
	var out bytes.Buffer
	out.Write(doc[:b])
	out.Write(bytes.TrimRight(section, "\n"))
	out.Write(doc[e+len(endMarker):])
	return out.Bytes(), nil
}
