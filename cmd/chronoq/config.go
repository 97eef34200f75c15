package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

// applyEnvAndConfig fills flags not given on the command line from the
// environment (CHRONOQ_<NAME>, dashes as underscores) and then from the
// config file: command line beats environment beats file beats default.
func applyEnvAndConfig(fs *flag.FlagSet, configPath string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	file := map[string]string{}
	if configPath != "" {
		var err error
		if file, err = readConfig(configPath); err != nil {
			return err
		}
		for k := range file {
			if fs.Lookup(k) == nil {
				return fmt.Errorf("config %s: unknown setting %q", configPath, k)
			}
		}
	}
	var firstErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "config" || firstErr != nil {
			return
		}
		env := "CHRONOQ_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				firstErr = fmt.Errorf("%s=%q: %w", env, v, err)
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				firstErr = fmt.Errorf("config %s: %s = %q: %w", configPath, f.Name, v, err)
			}
		}
	})
	return firstErr
}

// readConfig parses "name = value" lines; # starts a comment, values may
// be quoted.
func readConfig(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("config %s:%d: want name = value, got %q", path, n, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return out, nil
}
