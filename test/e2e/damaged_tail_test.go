package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The last log record — a batch of 100 acknowledged jobs — is complete on
// disk but one byte of it changed. That is damage, not a torn write: a
// normal start refuses (naming file and offset), `wal verify` exits
// non-zero, and --force-recovery starts while counting the frame and the
// 100 jobs it drops.
func TestDamagedLastRecordRefusesStart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	s.expect(201, "POST", "/v1/ns/default/queues/q/jobs", map[string]any{"payload": map[string]any{"first": true}})
	var jobs []any
	for i := 0; i < 100; i++ {
		jobs = append(jobs, map[string]any{"payload": map[string]any{"n": i, "pad": strings.Repeat("x", 40)}})
	}
	s.expect(201, "POST", "/v1/ns/default/queues/q/jobs/batch", map[string]any{"jobs": jobs})
	s.kill() // no final snapshot: the batch is only in the log

	// The last record in the dump is the batch.
	out, err := exec.Command(binPath, "wal", "dump", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("wal dump: %v\n%s", err, out)
	}
	var seg, off, length int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		seg, _ = strconv.Atoi(f[0])
		off, _ = strconv.Atoi(f[1])
		length, _ = strconv.Atoi(f[2])
	}
	if length < 100*40 {
		t.Fatalf("last record is %d bytes; the batch should be one record:\n%s", length, out)
	}
	path := filepath.Join(dir, "wal", fmt.Sprintf("%020d.log", seg))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off+8+length/2] ^= 0x02
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	p, err := launch(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.killNow()
		t.Fatalf("server started on a damaged last record; log:\n%s", tail(p.log.String(), 8<<10))
	}
	log := p.log.String()
	if p.waitErr == nil || !strings.Contains(log, path) || !strings.Contains(log, fmt.Sprintf("byte offset %d", off)) ||
		!strings.Contains(log, "100 job record(s)") {
		t.Fatalf("refusal does not name file, offset and jobs (exit %v):\n%s", p.waitErr, tail(log, 8<<10))
	}

	vout, err := exec.Command(binPath, "wal", "verify", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(vout), "CORRUPT") {
		t.Fatalf("wal verify on a damaged last record: err %v\n%s", err, vout)
	}

	s = startServer(t, dir, "--force-recovery")
	s.waitReady()
	if log := s.log.String(); !strings.Contains(log, "dropped_job_records=100") || !strings.Contains(log, "dropped_frames=1") {
		t.Fatalf("forced recovery does not count what it dropped:\n%s", tail(log, 8<<10))
	}
	m, _ := s.expect(200, "GET", "/v1/ns/default/queues/q", nil)
	if got := jint(m, "counts", "ready"); got != 1 {
		t.Fatalf("ready jobs after forced recovery: %d (queue %v)", got, m)
	}
	s.stop()
}
