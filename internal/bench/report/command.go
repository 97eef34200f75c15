package report

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// Command is "chronoq-bench plot RESULTS.json OUTDIR [--base TARGET]":
// it writes the PNGs, names them on stderr and prints the markdown table
// of medians on stdout.
func Command(args []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	base := fs.String("base", "chronoq-http", "target the ratio column compares with")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: chronoq-bench plot RESULTS.json OUTDIR [--base TARGET]\n\n")
		fs.PrintDefaults()
	}
	// flags may come before or after the two paths
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
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
