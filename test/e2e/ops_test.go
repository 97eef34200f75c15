package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binPath, args...).CombinedOutput()
	return string(out), err
}

// TestBackupRestoreCLI: `chronoq backup` of a running server, `chronoq wal
// verify` and `chronoq restore` of the result, and a server started on the
// restored directory with the jobs of the backup.
func TestBackupRestoreCLI(t *testing.T) {
	s := startServer(t, t.TempDir())
	var kept, acked []string
	for i := range 50 {
		id := s.putID("b", map[string]any{"payload": map[string]any{"n": i}})
		kept = append(kept, id)
	}
	for range 10 {
		job := s.takeOne("b")
		s.ack("b", job, nil)
		acked = append(acked, jstr(job, "id"))
	}
	bdir := filepath.Join(t.TempDir(), "bk")
	out, err := runCLI(t, "backup", "--admin-url", "http://"+s.adminAddr, bdir)
	if err != nil || !strings.Contains(out, "40 jobs") {
		t.Fatalf("chronoq backup: %v\n%s", err, out)
	}
	late := s.putID("b", map[string]any{"payload": "after"})
	if out, err := runCLI(t, "wal", "verify", bdir); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("chronoq wal verify BACKUP: %v\n%s", err, out)
	}

	// a damaged copy is refused with the file and the offset
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.CopyFS(bad, os.DirFS(bdir)); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(bad, "wal", "*.log"))
	b, _ := os.ReadFile(segs[len(segs)-1])
	b[len(b)-5] ^= 1
	os.WriteFile(segs[len(segs)-1], b, 0o600)
	out, err = runCLI(t, "restore", bad, filepath.Join(t.TempDir(), "x"))
	if err == nil || !strings.Contains(out, "wal/"+filepath.Base(segs[len(segs)-1])) || !strings.Contains(out, "bytes 0..") {
		t.Fatalf("restore of a damaged backup: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "wal", "verify", bad); err == nil {
		t.Fatalf("wal verify of a damaged backup succeeded:\n%s", out)
	}

	ddir := filepath.Join(t.TempDir(), "restored")
	if out, err := runCLI(t, "restore", bdir, ddir); err != nil {
		t.Fatalf("chronoq restore: %v\n%s", err, out)
	}
	s.stop()
	r := startServer(t, ddir)
	for _, id := range acked {
		r.wantGone("b", id)
	}
	r.wantGone("b", late)
	left := 0
	for _, id := range kept {
		if st, _, _ := r.request(r.httpAddr, "GET", jobp("b", id), nil); st == 200 {
			left++
		}
	}
	if left != 40 {
		t.Fatalf("restored server has %d of the 40 jobs left before the backup", left)
	}
}

// TestSIGHUPReloadsCertificate: chronoq serve re-reads its certificate on
// SIGHUP and keeps running; new connections get the new certificate.
func TestSIGHUPReloadsCertificate(t *testing.T) {
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "c.key")
	issue := func(sn int64) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(sn), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		kder, _ := x509.MarshalECPrivateKey(key)
		os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	}
	issue(100)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(binPath, "serve", "--data", filepath.Join(dir, "data"), "--http", addr, "--admin", "", "--beanstalk", "",
		"--tls-cert", certFile, "--tls-key", keyFile)
	log := &logBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	}()
	serial := func() int64 {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
		if err != nil {
			return -1
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if !eventually(15*time.Second, func() bool { return serial() == 100 }) {
		t.Fatal("server did not serve the first certificate")
	}
	// a connection opened before the reload stays usable
	held, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	issue(200)
	cmd.Process.Signal(syscall.SIGHUP)
	if !eventually(10*time.Second, func() bool { return serial() == 200 }) {
		t.Fatalf("after SIGHUP the server serves serial %d, want 200", serial())
	}
	held.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(held, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 12)
	if _, err := held.Read(buf); err != nil || !strings.HasPrefix(string(buf), "HTTP/1.1 200") {
		t.Fatalf("connection from before the reload: %q %v", buf, err)
	}
}
