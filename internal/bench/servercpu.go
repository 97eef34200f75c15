package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The server's CPU time per operation is the figure that does not depend
// on the load generator sharing the machine's cores: throughput falls when
// the bench itself eats CPU, the server's CPU per operation does not. It
// is read from /proc/<pid>/stat (utime + stime of every thread) before the
// clock starts and after the last worker stopped.

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux exposes
// these in USER_HZ, which is 100 on every architecture the kernel's ABI
// fixes it for (proc(5): "clock ticks (divide by sysconf(_SC_CLK_TCK))",
// and _SC_CLK_TCK answers USER_HZ), so it needs no cgo to read.
const userHZ = 100

// procRoot is where the proc filesystem is mounted; tests point it at a
// fixture directory.
var procRoot = "/proc"

// ProcCPU is a process's user + system CPU time so far.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	d, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("server cpu: /proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// parseProcStat reads utime and stime (fields 14 and 15, proc(5)) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no ')' closing the command name")
	}
	// after ')': state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8)
	// flags(9) minflt(10) cminflt(11) majflt(12) cmajflt(13) utime(14) stime(15)
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// ListenerPID finds the process listening on TCP port port (IPv4 or IPv6)
// of this host: the socket's inode from /proc/net/tcp{,6}, then the
// process holding a descriptor to it under /proc/*/fd. It needs the right
// to read other processes' fd directories (the same user, or root).
func ListenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(procRoot, "net", name))
		if err != nil {
			continue // no IPv6, say
		}
		err = listenInodes(f, port, inodes)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("server pid: /proc/net/%s: %w", name, err)
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("server pid: nothing listens on port %d", port)
	}
	dirs, err := os.ReadDir(procRoot)
	if err != nil {
		return 0, fmt.Errorf("server pid: %w", err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join(procRoot, d.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("server pid: no readable process holds the socket listening on port %d (pass --server-pid)", port)
}

// tcpListen is the st column's value of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// listenInodes adds the inodes of the sockets listening on port from a
// /proc/net/tcp-format table: "sl local_address rem_address st ... inode",
// addresses as HEXIP:HEXPORT.
func listenInodes(r io.Reader, port int, into map[string]bool) error {
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header line
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok || f[3] != tcpListen {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			return fmt.Errorf("local address %q: %w", f[1], err)
		}
		if int(p) == port && f[9] != "0" {
			into[f[9]] = true
		}
	}
	return sc.Err()
}

// addrPort is the port of a target address: host:port or a URL.
func addrPort(addr string) (int, error) {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr, _, _ = strings.Cut(rest, "/")
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("address %q: %w", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		return 0, fmt.Errorf("address %q: bad port", addr)
	}
	return n, nil
}

// cpuMeter measures one process's CPU between start and stop; a zero
// meter (no pid) measures nothing.
type cpuMeter struct {
	pid   int
	start time.Duration
	err   error
}

// newCPUMeter picks the server's pid: pid when given, else the listener
// of addr's port when it is on this host. A failure is kept, not fatal:
// the run still measures throughput and says why the CPU is missing.
func newCPUMeter(pid int, addr string) *cpuMeter {
	m := &cpuMeter{pid: pid}
	if pid == 0 {
		port, err := addrPort(addr)
		if err == nil {
			pid, err = ListenerPID(port)
		}
		if err != nil {
			m.err = err
			return m
		}
		m.pid = pid
	}
	m.start, m.err = ProcCPU(m.pid)
	return m
}

// stop answers the CPU spent since the meter was made.
func (m *cpuMeter) stop() (time.Duration, error) {
	if m.err != nil {
		return 0, m.err
	}
	end, err := ProcCPU(m.pid)
	if err != nil {
		return 0, err
	}
	return end - m.start, nil
}
