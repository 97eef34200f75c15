package bench

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// a command name with spaces and parentheses, as a process may name itself
	line := "4242 (chronoq (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 566 0 0 20 0 9 0 100 1000000 500 18446744073709551615\n"
	d, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 1800 * 10 * time.Millisecond; d != want { // (1234+566) ticks of 1/100 s
		t.Fatalf("cpu %v, want %v", d, want)
	}
	for _, bad := range []string{
		"",
		"4242 chronoq S 1",                   // no parentheses
		"4242 (chronoq) S 1 2 3 4 5 6 7 8 9", // cut short before utime
		"4242 (chronoq) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 566 0",
	} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

func TestListenerPIDFixture(t *testing.T) {
	root := t.TempDir()
	old := procRoot
	procRoot = root
	defer func() { procRoot = old }()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "net"), 0o755))
	// port 0x2B67 = 11111: one connection (st 01) with inode 900, one
	// listener on another port (inode 901), the listener we want on IPv6
	// (inode 902)
	must(os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(tcpHeader+
		"   0: 0100007F:2B67 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 900 1 0 20 4 30 10 -1\n"+
		"   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 901 1 0 100 0 0 10 0\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "net", "tcp6"), []byte(tcpHeader+
		"   0: 00000000000000000000000000000000:2B67 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 902 1 0 100 0 0 10 0\n"), 0o644))
	for pid, target := range map[string]string{"10": "socket:[900]", "11": "socket:[901]", "12": "socket:[902]", "13": "/dev/null"} {
		must(os.MkdirAll(filepath.Join(root, pid, "fd"), 0o755))
		must(os.Symlink(target, filepath.Join(root, pid, "fd", "3")))
	}
	must(os.MkdirAll(filepath.Join(root, "self"), 0o755)) // not a pid
	pid, err := ListenerPID(11111)
	if err != nil || pid != 12 {
		t.Fatalf("pid %d, %v; want 12 (the listener, not the connection's 10)", pid, err)
	}
	if pid, err := ListenerPID(8080); err != nil || pid != 11 {
		t.Fatalf("port 8080: pid %d, %v; want 11", pid, err)
	}
	if _, err := ListenerPID(9); err == nil || !strings.Contains(err.Error(), "nothing listens on port 9") {
		t.Fatalf("port 9: %v", err)
	}
	must(os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(tcpHeader+
		"   0: 0100007F:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 903 1 0 100 0 0 10 0\n"), 0o644))
	if _, err := ListenerPID(11111); err == nil || !strings.Contains(err.Error(), "ZZZZ") {
		t.Fatalf("bad port column: %v", err)
	}
}

// TestLiveProcess finds this test process by a port it listens on and
// sees its CPU time grow while it works.
func TestLiveProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port, err := addrPort("http://" + ln.Addr().String() + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := ListenerPID(port)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("pid %d, %v; want this process %d", pid, err, os.Getpid())
	}
	m := newCPUMeter(0, ln.Addr().String())
	if m.err != nil || m.pid != os.Getpid() {
		t.Fatalf("meter %+v", m)
	}
	// work until the kernel's tick accounting moves (bounded)
	x := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for i := 0; i < 1e6; i++ {
			x += i
		}
		if d, err := m.stop(); err != nil {
			t.Fatal(err)
		} else if d > 0 {
			return
		}
	}
	t.Fatalf("no CPU time accounted in 10s of work (%d)", x)
}

func TestAddrPort(t *testing.T) {
	for in, want := range map[string]int{"127.0.0.1:7777": 7777, "http://127.0.0.1:17777": 17777, "http://[::1]:80/x": 80, "localhost:11300": 11300} {
		if got, err := addrPort(in); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1", "http://host", "h:0", "h:99999"} {
		if _, err := addrPort(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
