//go:build !unix

package beanstalk

import "os"

// DrainSignals put beanstalkd into drain mode; there is no SIGUSR1 here.
var DrainSignals []os.Signal
