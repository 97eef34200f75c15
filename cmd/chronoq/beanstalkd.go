package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chronoq/chronoq/internal/api/beanstalk"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/wal"
)

// chronoq beanstalkd is a drop-in for the beanstalkd binary: the same
// flags with the same meanings, so it can replace /usr/bin/beanstalkd in a
// systemd unit or a client library's test harness.

const beanstalkdUsage = `Use: %s beanstalkd [OPTIONS]

A drop-in for beanstalkd %s: its protocol and flags, chronoq's storage.

Options:
 -b DIR   write-ahead log directory (without it, jobs live in a temporary
          directory removed at exit: nothing survives a restart, as with
          beanstalkd without a binlog)
 -f MS    fsync at most once every MS milliseconds (use -f0 for "always
          fsync"; the default is to fsync before every answer, which group
          commit makes cheap)
 -F       never fsync
 -I SECS  close a connection idle that long outside a reserve (default
          0: never, as beanstalkd)
 -l ADDR  listen on address (default is 0.0.0.0); unix:PATH for a socket
 -p PORT  listen on port (default is 11300)
 -s BYTES set the size of each write-ahead log file (default is 67108864);
          will be rounded up to a multiple of 4096 bytes
 -z BYTES set the maximum job size in bytes (default is 65535);
          max allowed is 67108864 bytes (larger values are cut to it)
 -c, -n   accepted for compatibility (compaction is automatic)
 -v       show version information
 -V       increase verbosity
 -h       show this help
`

type beanstalkdConfig struct {
	addr, port string
	dir        string
	syncMS     int64 // -1: not given
	noSync     bool
	segment    int64
	maxJob     int64
	idle       time.Duration // -I
	verbose    int
	help, ver  bool
}

// parseBeanstalkdFlags reads flags the way beanstalkd's optparse does:
// single letters that may be grouped ("-Vb DIR"), values either glued
// ("-p11300") or in the next argument, parsing stopping at the first
// argument that is not a flag.
func parseBeanstalkdFlags(args []string) (beanstalkdConfig, error) {
	c := beanstalkdConfig{port: "11300", syncMS: -1, maxJob: beanstalk.DefaultMaxJobSize}
	for len(args) > 0 {
		a := args[0]
		if len(a) < 2 || a[0] != '-' {
			return c, fmt.Errorf("unexpected argument %q", a)
		}
		args = args[1:]
		for i := 1; i < len(a); i++ {
			f := a[i]
			value := func() (string, error) {
				if rest := a[i+1:]; rest != "" {
					i = len(a)
					return rest, nil
				}
				if len(args) == 0 {
					return "", fmt.Errorf("flag -%c requires an argument", f)
				}
				v := args[0]
				args = args[1:]
				return v, nil
			}
			var v string
			var err error
			switch f {
			case 'p', 'l', 'b', 'z', 's', 'f', 'u', 'I':
				if v, err = value(); err != nil {
					return c, err
				}
			}
			switch f {
			case 'p':
				c.port = v
			case 'l':
				c.addr = v
			case 'b':
				c.dir = v
			case 'z':
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 {
					return c, fmt.Errorf("-z: maximum job size must be a positive number of bytes (at most %d), got %q", beanstalk.MaxJobSizeLimit, v)
				}
				c.maxJob = n
			case 's':
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 || n > 1<<32-4096 {
					return c, fmt.Errorf("-s: log file size must be a positive number of bytes below 4 GiB, got %q", v)
				}
				c.segment = (n + 4095) &^ 4095
			case 'f':
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return c, fmt.Errorf("-f: want milliseconds, got %q", v)
				}
				c.syncMS, c.noSync = n, false
			case 'F':
				c.noSync = true
			case 'I':
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil || n < 0 {
					return c, fmt.Errorf("-I: want an idle timeout in seconds (0: none), got %q", v)
				}
				c.idle = time.Duration(n) * time.Second
			case 'u':
				return c, errors.New("-u: switching users is not supported; run chronoq as that user (systemd: User=)")
			case 'c', 'n':
			case 'V':
				c.verbose++
			case 'v':
				c.ver = true
			case 'h':
				c.help = true
			default:
				return c, fmt.Errorf("unknown flag: -%c", f)
			}
		}
	}
	return c, nil
}

func beanstalkdCmd(args []string) error {
	cfg, err := parseBeanstalkdFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chronoq beanstalkd: %v\n\n"+beanstalkdUsage, err, os.Args[0], beanstalkVersion)
		os.Exit(5) // beanstalkd's exit status for a usage error
	}
	if cfg.help {
		fmt.Fprintf(os.Stderr, beanstalkdUsage, os.Args[0], beanstalkVersion)
		return nil
	}
	if cfg.ver {
		fmt.Printf("beanstalkd %s (chronoq)\n", beanstalkVersion)
		return nil
	}
	return runBeanstalkd(cfg, nil)
}

const beanstalkVersion = "1.13"

// runBeanstalkd serves until SIGTERM or SIGINT (or until stop is closed,
// for tests).
func runBeanstalkd(cfg beanstalkdConfig, stop <-chan struct{}) error {
	level := slog.LevelWarn
	switch {
	case cfg.verbose >= 2:
		level = slog.LevelDebug
	case cfg.verbose == 1:
		level = slog.LevelInfo
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	sc := server.Default()
	sc.HTTPAddr, sc.AdminAddr, sc.BeanstalkAddr = "", "", ""
	sc.DataDir, sc.SegmentSize, sc.Logger = cfg.dir, cfg.segment, lg
	sc.MaxConnections = 0 // beanstalkd has no connection cap
	switch {
	case sc.DataDir == "":
		// Nothing outlives the process, so syncing would buy nothing.
		tmp, err := os.MkdirTemp("", "chronoq-beanstalkd-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		sc.DataDir = tmp
		sc.Sync = wal.SyncNever
	case cfg.noSync:
		sc.Sync = wal.SyncNever
	case cfg.syncMS > 0:
		sc.Sync, sc.SyncInterval = wal.SyncInterval, time.Duration(cfg.syncMS)*time.Millisecond
	default:
		sc.Sync = wal.SyncAlways
	}
	if sc.SegmentSize == 0 {
		sc.SegmentSize = wal.DefaultSegmentSize
	}
	// Signals are caught from before the socket opens: whoever sees it
	// listening may already stop it gracefully.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, append([]os.Signal{syscall.SIGTERM, os.Interrupt}, beanstalk.DrainSignals...)...)
	defer signal.Stop(sig)
	ln, err := beanstalkdListener(cfg)
	if err != nil {
		return err
	}
	// beanstalkd listens on every address by default, without
	// authentication: that is what a drop-in must do.
	sc.BeanstalkListener, sc.BeanstalkPublic = ln, true
	sc.Beanstalk = beanstalk.Options{
		MaxJobSize:    int(cfg.maxJob),
		BinlogMaxSize: sc.SegmentSize,
		NoBinlog:      cfg.dir == "",
		IdleTimeout:   cfg.idle,
		Version:       beanstalkVersion,
	}
	srv, err := server.New(sc)
	if err != nil {
		ln.Close()
		return err
	}
	lg.Info("listening", "addr", ln.Addr().String(), "data", sc.DataDir, "sync", sc.Sync.String())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			select {
			case s := <-sig:
				if s != syscall.SIGTERM && s != os.Interrupt {
					// beanstalkd's drain mode: refuse new jobs, serve the rest
					srv.SetBeanstalkDraining(true)
					lg.Info("draining: new jobs are refused")
					continue
				}
				lg.Info("shutting down", "signal", s.String())
			case <-stop:
			case <-ctx.Done():
				return
			}
			cancel()
			return
		}
	}()
	runErr := srv.Run(ctx)
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// beanstalkdListener opens -l/-p, a unix:PATH socket, or the socket
// systemd passed in (socket activation, as beanstalkd supports).
func beanstalkdListener(cfg beanstalkdConfig) (net.Listener, error) {
	if pid, _ := strconv.Atoi(os.Getenv("LISTEN_PID")); pid == os.Getpid() {
		if n, _ := strconv.Atoi(os.Getenv("LISTEN_FDS")); n >= 1 {
			f := os.NewFile(3, "systemd socket")
			ln, err := net.FileListener(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("systemd socket: %w", err)
			}
			return ln, nil
		}
	}
	if path, ok := strings.CutPrefix(cfg.addr, "unix:"); ok {
		// A socket left by an earlier run would make the bind fail.
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(path)
		}
		return net.Listen("unix", path)
	}
	lc := net.ListenConfig{}
	return lc.Listen(context.Background(), "tcp", net.JoinHostPort(cfg.addr, cfg.port))
}
