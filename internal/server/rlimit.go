package server

import "log/slog"

// fileHeadroom is what the process needs open besides client connections:
// log segments and their read descriptors (internal/wal/readcache.go keeps
// up to 16), snapshots being written, backups, cluster peers, the data
// directory lock.
const fileHeadroom = 512

// filesNeeded is the descriptor count the configured connection caps can
// reach: every listener at its cap plus headroom. 0 means no cap (the
// beanstalkd command): as many as the hard limit allows.
func filesNeeded(cfg Config) uint64 {
	if cfg.MaxConnections <= 0 {
		return 0
	}
	listeners := 0
	for _, a := range []string{cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr} {
		if a != "" {
			listeners++
		}
	}
	if cfg.BeanstalkListener != nil && cfg.BeanstalkAddr == "" {
		listeners++
	}
	return uint64(listeners)*uint64(cfg.MaxConnections) + fileHeadroom
}

// fileLimit reads and sets the soft and hard RLIMIT_NOFILE.
type fileLimit struct {
	get func() (soft, hard uint64, err error)
	set func(soft, hard uint64) error
}

// raiseFileLimit raises the soft open-file limit to what the connection
// caps need (up to the hard limit) and says so in the log; a hard limit
// below the need is logged as a warning, because connections beyond it
// fail with "too many open files" rather than meeting the cap's orderly
// refusal. Failing to read or raise the limit does not stop the server.
func raiseFileLimit(lg *slog.Logger, need uint64, fl fileLimit) {
	soft, hard, err := fl.get()
	if err != nil {
		lg.Warn("reading the open-file limit failed", "err", err)
		return
	}
	want := need
	if need == 0 || need > hard {
		want = hard
	}
	if soft < want {
		if err := fl.set(want, hard); err != nil {
			lg.Warn("raising the open-file limit failed", "soft", soft, "wanted", want, "hard", hard, "err", err)
		} else {
			lg.Info("raised the open-file limit for the connection cap", "from", soft, "to", want, "hard", hard, "needed", need)
			soft = want
		}
	}
	if need > 0 && soft < need {
		lg.Warn("the open-file limit is below what --max-connections allows; raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower --max-connections",
			"limit", soft, "needed", need)
	}
}
