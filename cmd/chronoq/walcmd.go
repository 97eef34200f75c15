package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

const walUsage = `Usage:
  chronoq wal verify DIR   check every segment header and record CRC of DIR's log
                           (DIR is the data directory or its wal/ folder);
                           exits 1 when corruption is found. A backup
                           directory (chronoq backup) is checked whole:
                           manifest checksums, snapshot and log
  chronoq wal dump DIR     print one line per record: segment, offset, length, contents

Example:
  chronoq wal verify ./chronoq-data
`

func walCmd(args []string) error {
	if len(args) != 2 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(os.Stderr, walUsage)
		if len(args) >= 1 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errors.New("wal: want a verb (verify, dump) and a directory")
	}
	dir := args[1]
	if _, err := os.Stat(filepath.Join(dir, broker.BackupManifestName)); err == nil && args[0] == "verify" {
		m, err := broker.VerifyBackup(dir, os.Stdout)
		if err != nil {
			return fmt.Errorf("wal verify: backup %s: %w", dir, err)
		}
		fmt.Printf("backup %s: OK: %d files match the manifest, %d jobs at cut %s\n", dir, len(m.Files), m.Jobs, m.Cut)
		return nil
	}
	if st, err := os.Stat(filepath.Join(dir, "wal")); err == nil && st.IsDir() {
		dir = filepath.Join(dir, "wal")
	}
	switch args[0] {
	case "verify":
		if _, err := wal.VerifyCounting(dir, os.Stdout, broker.CountJobRecords); err != nil {
			return fmt.Errorf("wal verify %s: %w", dir, err)
		}
		return nil
	case "dump":
		return wal.Dump(dir, os.Stdout, func(body []byte) string {
			ent, err := engine.DecodeEntry(body, 0, 0)
			if err != nil {
				return "undecodable: " + err.Error()
			}
			return ent.Describe()
		})
	default:
		return fmt.Errorf("wal: unknown verb %q (want verify or dump)", args[0])
	}
}
