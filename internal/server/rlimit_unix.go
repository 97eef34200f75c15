//go:build unix

package server

import "syscall"

func processFileLimit() fileLimit {
	return fileLimit{
		get: func() (uint64, uint64, error) {
			var r syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
				return 0, 0, err
			}
			return uint64(r.Cur), uint64(r.Max), nil
		},
		set: func(soft, hard uint64) error {
			r := syscall.Rlimit{Cur: soft, Max: hard}
			return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
		},
	}
}
