package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/internal/broker"
)

// cliBackup: chronoq backup [--admin-url URL] [--token T] [--ca-file F] DIR
func cliBackup(args []string) error {
	c := newCLICmd("backup", "DIR",
		"Take an online backup of a running server into DIR (new or empty): a fresh snapshot plus the log after it, "+
			"with a manifest of checksums (POST /admin/backup; writes go on meanwhile). "+
			"The backup holds every change acknowledged before it was requested; restore it with chronoq restore",
		"chronoq backup --admin-url https://db1:7778 --ca-file ca.pem /backups/chronoq-$(date +%F)")
	timeout := c.fs.Duration("timeout", 0, "give up after this long (0: no limit)")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return cliDone(err)
	}
	ctx := context.Background()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	admin := strings.TrimRight(cliEnv(c.conn.adminURL, "CHRONOQ_ADMIN_URL", cliDefaultAdminURL), "/")
	tlsCfg, err := client.TLSFiles(cliEnv(c.conn.caFile, "CHRONOQ_CA_FILE", ""), "", "")
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, admin+"/admin/backup", nil)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if tok := cliEnv(c.conn.token, "CHRONOQ_TOKEN", ""); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("backup: HTTP %d: %s", resp.StatusCode, e.Error.Message)
		}
		return fmt.Errorf("backup: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	m, err := broker.ReceiveBackup(resp.Body, pos[0])
	if err != nil {
		return err
	}
	var size int64
	for _, f := range m.Files {
		size += f.Size
	}
	fmt.Fprintf(cliOut, "backup %s: %d jobs, %d files, %d bytes, cut at log position %s, took %s\n",
		pos[0], m.Jobs, len(m.Files), size, m.Cut, time.Since(start).Round(time.Millisecond))
	return nil
}

const restoreUsage = `Usage: chronoq restore BACKUP_DIR DATA_DIR

Verifies the backup in BACKUP_DIR (every file's checksums, then the
snapshot's and the log's own structure) and lays it out as the data
directory DATA_DIR, which must be new or empty. Run it with the server
stopped; a server started on DATA_DIR has exactly the jobs of the backup's
cut (see its MANIFEST.json). Damage is reported with the file and offset.

Example:
  chronoq restore /backups/chronoq-2026-11-25 /var/lib/chronoq
`

func restoreCmd(args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(cliOut, restoreUsage)
		return nil
	}
	if len(args) != 2 {
		fmt.Fprint(cliErr, restoreUsage)
		return errors.New("restore: want a backup directory and a data directory")
	}
	m, err := broker.RestoreBackup(args[0], args[1])
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(cliOut, "restored %s into %s: %d jobs, state at log position %s (backup of %s)\n",
		args[0], args[1], m.Jobs, m.Cut, m.Created.Format(time.RFC3339))
	return nil
}
