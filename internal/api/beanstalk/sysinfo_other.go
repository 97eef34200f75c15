//go:build !linux

package beanstalk

import (
	"os"
	"runtime"
	"sync"
	"time"
)

// rusage is not read outside Linux; stats report zero CPU time.
func rusage() (user, sys time.Duration) { return 0, 0 }

type host struct{ hostname, os, platform string }

var hostInfo = sync.OnceValue(func() host {
	name, _ := os.Hostname()
	return host{name, runtime.GOOS, runtime.GOARCH}
})
