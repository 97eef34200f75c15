//go:build unix

package beanstalk

import (
	"os"
	"syscall"
)

// DrainSignals put beanstalkd into drain mode (see Server.SetDraining).
var DrainSignals = []os.Signal{syscall.SIGUSR1}
