package beanstalk_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

var statsKeys = []string{
	"current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed", "current-jobs-buried",
	"cmd-put", "cmd-peek", "cmd-peek-ready", "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve",
	"cmd-reserve-with-timeout", "cmd-delete", "cmd-release", "cmd-use", "cmd-watch", "cmd-ignore", "cmd-bury",
	"cmd-kick", "cmd-touch", "cmd-stats", "cmd-stats-job", "cmd-stats-tube", "cmd-list-tubes",
	"cmd-list-tube-used", "cmd-list-tubes-watched", "cmd-pause-tube", "job-timeouts", "total-jobs",
	"max-job-size", "current-tubes", "current-connections", "current-producers", "current-workers",
	"current-waiting", "total-connections", "pid", "version", "rusage-utime", "rusage-stime", "uptime",
	"binlog-oldest-index", "binlog-current-index", "binlog-records-migrated", "binlog-records-written",
	"binlog-max-size", "draining", "id", "hostname", "os", "platform",
}

var statsTubeKeys = []string{
	"name", "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
	"current-jobs-buried", "total-jobs", "current-using", "current-watching", "current-waiting",
	"cmd-delete", "cmd-pause-tube", "pause", "pause-time-left",
}

var statsJobKeys = []string{
	"id", "tube", "state", "pri", "age", "delay", "ttr", "time-left", "file", "reserves", "timeouts",
	"releases", "buries", "kicks",
}

func TestStatsJob(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 1 0 0 1\r\na\r\nstats-job 1\r\n")
		c.expect("INSERTED 1\r\n")
		doc := c.data()
		if k := keysOf(t, doc); !slices.Equal(k, statsJobKeys) {
			t.Fatalf("%s: stats-job keys %v, want %v", s.name, k, statsJobKeys)
		}
		m := parseYAML(doc)
		file := m["file"]
		if _, err := strconv.Atoi(file); err != nil {
			t.Errorf("%s: file %q", s.name, file)
		}
		want := "---\nid: 1\ntube: " + s.q("default") + "\nstate: ready\npri: 1\nage: 0\ndelay: 0\nttr: 1\ntime-left: 0\nfile: " + file +
			"\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n"
		if doc != want {
			t.Errorf("%s: stats-job\n got %q\nwant %q", s.name, doc, want)
		}
		c.send("put 0 0 5 1\r\na\r\nstats-job 2\r\n")
		c.expect("INSERTED 2\r\n")
		if m := parseYAML(c.data()); m["time-left"] != "0" {
			t.Errorf("%s: time-left of a ready job %q", s.name, m["time-left"])
		}
		c.send("reserve\r\nstats-job 2\r\n")
		c.expect("RESERVED 2 1\r\na\r\n")
		if m := parseYAML(c.data()); m["state"] != "reserved" || m["time-left"] != "4" && m["time-left"] != "5" || m["reserves"] != "1" {
			t.Errorf("%s: reserved job: %v", s.name, m)
		}
		for _, bad := range []string{"111ABC", "111 222", ""} {
			c.send("stats-job " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		c.send("stats-job 111\r\n")
		c.expect("NOT_FOUND\r\n")
	})
}

func TestStatsTube(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("use tubea\r\n")
		c.expect("USING tubea\r\n")
		c.send("put 0 0 0 1\r\nx\r\n")
		c.expect("INSERTED 1\r\n")
		c.send("delete 1\r\n")
		c.expect("DELETED\r\n")
		c.send("stats-tube tubea\r\n")
		doc := c.data()
		if k := keysOf(t, doc); !slices.Equal(k, statsTubeKeys) {
			t.Fatalf("%s: stats-tube keys %v", s.name, k)
		}
		want := "---\nname: " + s.q("tubea") + "\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\n" +
			"current-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 1\ncurrent-using: 1\ncurrent-watching: 0\n" +
			"current-waiting: 0\ncmd-delete: 1\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n"
		if doc != want {
			t.Errorf("%s: stats-tube tubea\n got %q\nwant %q", s.name, doc, want)
		}
		c.send("stats-tube default\r\n")
		want = "---\nname: " + s.q("default") + "\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\n" +
			"current-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 0\ncurrent-using: 0\ncurrent-watching: 1\n" +
			"current-waiting: 0\ncmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n"
		if doc := c.data(); doc != want {
			t.Errorf("%s: stats-tube default\n got %q\nwant %q", s.name, doc, want)
		}
		// Counts by state, urgency (priority below 1024) and waiters.
		c.put(1023, 0, 10, "u")
		c.put(1024, 0, 10, "n")
		c.put(0, 100, 10, "d")
		c.send("watch tubea\r\nreserve\r\n")
		c.expect("WATCHING 2\r\nRESERVED 2 1\r\nu\r\n")
		w := s.dial()
		w.send("watch tubea\r\nignore default\r\n")
		w.expect("WATCHING 2\r\nWATCHING 1\r\n")
		c.send("reserve\r\nbury 3 0\r\n")
		c.expect("RESERVED 3 1\r\nn\r\nBURIED\r\n")
		w.send("reserve\r\n")
		time.Sleep(100 * time.Millisecond) // until w waits
		o := s.dial()
		m := o.statsTube("tubea")
		for k, v := range map[string]string{"current-jobs-urgent": "0", "current-jobs-ready": "0", "current-jobs-reserved": "1",
			"current-jobs-delayed": "1", "current-jobs-buried": "1", "total-jobs": "4", "current-watching": "2", "current-waiting": "1"} {
			if m[k] != v {
				t.Errorf("%s: stats-tube %s: %q, want %q", s.name, k, m[k], v)
			}
		}
		c.send("kick 1\r\n")
		c.expect("KICKED 1\r\n")
		w.expect("RESERVED 3 1\r\nn\r\n")
		c.send("release 2 5 0\r\n")
		c.expect("RELEASED\r\n")
		if m := o.statsTube("tubea"); m["current-jobs-urgent"] != "1" || m["current-jobs-ready"] != "1" || m["current-waiting"] != "0" {
			t.Errorf("%s: urgent after release: %v", s.name, m)
		}
		c.send("stats-tube nosuch\r\n")
		c.expect("NOT_FOUND\r\n")
	})
}

var (
	numRe   = regexp.MustCompile(`^[0-9]+$`)
	timeRe  = regexp.MustCompile(`^[0-9]+\.[0-9]{6}$`)
	hexRe   = regexp.MustCompile(`^[0-9a-f]{16}$`)
	quoteRe = regexp.MustCompile(`^"[^"]*"$`)
)

func TestStats(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("stats\r\n")
		doc := c.data()
		if k := keysOf(t, doc); !slices.Equal(k, statsKeys) {
			t.Fatalf("%s: stats keys\n got %v\nwant %v", s.name, k, statsKeys)
		}
		m := parseYAML(doc)
		for _, k := range statsKeys {
			v := m[k]
			var ok bool
			switch k {
			case "rusage-utime", "rusage-stime":
				ok = timeRe.MatchString(v)
			case "draining":
				ok = v == "false"
			case "id":
				ok = hexRe.MatchString(v)
			case "version": // quoted since 1.12
				ok = quoteRe.MatchString(v)
			case "hostname", "os", "platform":
				ok = !s.quotes() || quoteRe.MatchString(v)
			default:
				ok = numRe.MatchString(v)
			}
			if !ok {
				t.Errorf("%s: stats %s: %q", s.name, k, v)
			}
		}
		if m["pid"] != strconv.Itoa(pidOf(s)) || m["version"] != `"`+s.version+`"` || m["current-tubes"] != "1" {
			t.Errorf("%s: pid %q version %q cmd-stats %q current-tubes %q", s.name, m["pid"], m["version"], m["cmd-stats"], m["current-tubes"])
		}
		host, _ := os.Hostname()
		if m["hostname"] != s.q(host) {
			t.Errorf("%s: hostname %q, want %q", s.name, m["hostname"], s.q(host))
		}

		// Counters: commands, connections and their kinds.
		p, w := s.dial(), s.dial()
		p.put(0, 0, 10, "a")
		p.put(2000, 0, 10, "b")
		w.send("reserve\r\nuse x\r\nwatch y\r\nignore y\r\npeek 1\r\npeek-ready\r\nlist-tubes\r\n")
		w.expect("RESERVED 1 1\r\na\r\nUSING x\r\nWATCHING 2\r\nWATCHING 1\r\nFOUND 1 1\r\na\r\nNOT_FOUND\r\n")
		w.data()
		v := s.dial()
		v.send("watch z\r\nignore default\r\nreserve-with-timeout 5\r\n")
		v.expect("WATCHING 2\r\nWATCHING 1\r\n")
		time.Sleep(100 * time.Millisecond) // until v waits
		statsCmds, _ := strconv.Atoi(m["cmd-stats"])
		conns, _ := strconv.Atoi(m["current-connections"])
		total, _ := strconv.Atoi(m["total-connections"])
		m = c.stats()
		for k, want := range map[string]string{
			"current-jobs-urgent": "0", "current-jobs-ready": "1", "current-jobs-reserved": "1", "cmd-put": "2",
			"cmd-reserve": "1", "cmd-reserve-with-timeout": "1", "cmd-use": "1", "cmd-watch": "2", "cmd-ignore": "2",
			"cmd-peek": "1", "cmd-peek-ready": "1", "cmd-list-tubes": "1", "cmd-stats": strconv.Itoa(statsCmds + 1), "total-jobs": "2",
			"current-connections": strconv.Itoa(conns + 3), "current-producers": "1", "current-workers": "2",
			"current-waiting": "1", "total-connections": strconv.Itoa(total + 3), "current-tubes": "3",
		} {
			if m[k] != want {
				t.Errorf("%s: stats %s %q, want %q", s.name, k, m[k], want)
			}
		}
	})
}

// pidOf answers the server's process id (chronoq runs in this process).
func pidOf(s *target) int {
	if s.chronoq() {
		return os.Getpid()
	}
	return s.cmd.Process.Pid
}

// stats-job's file is the binlog file holding the job: 0 without a binlog
// (client libraries compare whole stats-job documents), its number with
// one.
func TestStatsJobFile(t *testing.T) {
	for _, o := range []struct {
		name string
		opts serverOpts
	}{{"memory", serverOpts{}}, {"durable", serverOpts{durable: true}}} {
		t.Run(o.name, func(t *testing.T) {
			eachWith(t, o.opts, func(t *testing.T, s *target) {
				c := s.dial()
				id := c.put(0, 0, 10, "a")
				file := c.statsJob(id)["file"]
				n, err := strconv.Atoi(file)
				switch {
				case err != nil:
					t.Fatalf("%s: file %q is not a number", s.name, file)
				case !o.opts.durable && n != 0:
					t.Errorf("%s: file %d without a binlog, want 0", s.name, n)
				case o.opts.durable && n < 1:
					t.Errorf("%s: file %d with a binlog, want its number (1 or more)", s.name, n)
				}
			})
		})
	}
}
