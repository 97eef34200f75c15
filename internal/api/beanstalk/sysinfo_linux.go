package beanstalk

import (
	"sync"
	"syscall"
	"time"
)

// rusage is the process's user and system CPU time (stats' rusage-*).
func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

type host struct{ hostname, os, platform string }

// hostInfo is uname's node name, kernel version and machine, which
// beanstalkd reports as hostname, os and platform.
var hostInfo = sync.OnceValue(func() host {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return host{}
	}
	return host{cstr(u.Nodename[:]), cstr(u.Version[:]), cstr(u.Machine[:])}
})

// cstr reads a NUL-terminated utsname field, whose element type differs
// between architectures.
func cstr[T int8 | uint8](b []T) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
