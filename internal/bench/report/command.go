package report

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Command runs chronoq-bench's report subcommands; args[0] names one:
//
//	plot RESULTS.json OUTDIR [--base TARGET]
//	    writes the PNGs, names them on stderr and prints the markdown
//	    table of medians on stdout;
//	report RESULTS.json --doc FILE --plots DIR [--before BEFORE.json] [--commit SHA]
//	    draws the PNGs into DIR and rewrites FILE's generated section
//	    (between its marker lines) from the run: the speed goals judged
//	    on it, its medians, before and after, its CPU profiles, its plots.
func Command(args []string) error {
	if len(args) == 0 {
		return errors.New("want plot or report")
	}
	switch args[0] {
	case "plot":
		return plotCommand(args[1:])
	case "report":
		return reportCommand(args[1:])
	}
	return fmt.Errorf("%q: want plot or report", args[0])
}

// flags makes a subcommand's flag set; usage is its usage line.
func flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: chronoq-bench %s %s\n\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before, between or after the
// positional arguments, and answers the positional ones; help says the
// usage was asked for (and printed).
func parse(fs *flag.FlagSet, args []string) (pos []string, help bool, err error) {
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, errors.Is(err, flag.ErrHelp), err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, false, nil
}

func plotCommand(args []string) error {
	fs := flags("plot", "RESULTS.json OUTDIR [--base TARGET]")
	base := fs.String("base", tHTTP, "target the ratio column compares with")
	pos, help, err := parse(fs, args)
	if help {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("bench plot: want RESULTS.json OUTDIR")
	}
	files, err := Plot(pos[0], pos[1])
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "wrote", f)
	}
	if err != nil {
		return fmt.Errorf("bench plot: %w", err)
	}
	rs, err := LoadResults(pos[0])
	if err != nil {
		return err
	}
	WriteMarkdown(os.Stdout, rs, *base)
	return nil
}

func reportCommand(args []string) error {
	fs := flags("report", "RESULTS.json --doc FILE --plots DIR [--before BEFORE.json] [--commit SHA]")
	doc := fs.String("doc", "", "the markdown file whose generated section is rewritten (required)")
	plots := fs.String("plots", "", "directory the PNGs are drawn into (required)")
	before := fs.String("before", "", "results file of the run to compare with")
	commit := fs.String("commit", "", "what the run's server was built from, as the report should name it")
	pos, help, err := parse(fs, args)
	if help {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return errors.New("bench report: want one RESULTS.json")
	case *doc == "":
		return errors.New("bench report: --doc is required")
	case *plots == "":
		return errors.New("bench report: --plots is required")
	}
	return Report(os.Stderr, pos[0], *doc, *plots, *before, *commit)
}

// Report draws a run's plots into plotDir and rewrites docPath's
// generated section from the run; it names what it wrote on log. The
// document is rewritten only when everything else succeeded.
func Report(log io.Writer, results, docPath, plotDir, before, commit string) error {
	old, err := os.ReadFile(docPath)
	if err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	// fail on a document without markers, or on input the section cannot
	// be written from (a bad --before, a damaged .load.txt), before
	// drawing anything: a refused report changes nothing
	if _, err := Splice(old, []byte(beginMarker+"\n"+endMarker)); err != nil {
		return fmt.Errorf("bench report: %s: %w", docPath, err)
	}
	cfg := SectionConfig{Results: results, Before: before, Commit: commit}
	if err := WriteSection(io.Discard, cfg); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	files, err := Plot(results, plotDir)
	if err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	for _, f := range files {
		fmt.Fprintln(log, "wrote", f)
		rel, err := filepath.Rel(filepath.Dir(docPath), f)
		if err != nil {
			return fmt.Errorf("bench report: %w", err)
		}
		cfg.Plots = append(cfg.Plots, filepath.ToSlash(rel))
	}
	var section bytes.Buffer
	if err := WriteSection(&section, cfg); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	out, err := Splice(old, section.Bytes())
	if err != nil {
		return fmt.Errorf("bench report: %s: %w", docPath, err)
	}
	tmp := docPath + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	if err := os.Rename(tmp, docPath); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	fmt.Fprintln(log, "rewrote", docPath)
	return nil
}
