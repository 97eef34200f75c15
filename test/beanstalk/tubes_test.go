package beanstalk_test

import (
	"strings"
	"testing"
	"time"
)

func TestTubeNames(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, name := range []string{"x_y", "a+b/c;d$e(f)g.h-i_j", "A", "0", "a..b", "...", "$", name200} {
			c.send("use " + name + "\r\n")
			c.expect("USING " + name + "\r\n")
		}
		for _, bad := range []string{"-a", "a b", "", " a", "a:b", "a\tb", "é", name200 + "x"} {
			for _, cmd := range []string{"use", "watch", "ignore", "stats-tube"} {
				c.send(cmd + " " + bad + "\r\n")
				c.expect("BAD_FORMAT\r\n")
			}
		}
		// Jobs go through tubes whose names chronoq has to escape.
		for _, name := range []string{"a+b/c;d$e(f)g", "a..b", "...", "x.y"} {
			o := s.dial()
			o.send("use " + name + "\r\nwatch " + name + "\r\nignore default\r\n")
			o.expect("USING " + name + "\r\nWATCHING 2\r\nWATCHING 1\r\n")
			id := o.put(0, 0, 10, name)
			o.send("reserve-with-timeout 0\r\n")
			o.expect("RESERVED " + itoa(id) + " " + itoa(uint64(len(name))) + "\r\n" + name + "\r\n")
			if m := o.statsJob(id); m["tube"] != s.q(name) {
				t.Errorf("%s: tube of job in %q: %q", s.name, name, m["tube"])
			}
			if m := o.statsTube(name); m["name"] != s.q(name) || m["total-jobs"] != "1" {
				t.Errorf("%s: stats-tube %q: %v", s.name, name, m)
			}
		}
	})
}

func TestListTubes(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("watch w\r\n")
		c.expect("WATCHING 2\r\n")
		c.send("use u\r\n")
		c.expect("USING u\r\n")
		c.send("list-tubes\r\n")
		c.expect(okData("---\n- default\n- w\n- u\n"))
		c.send("list-tube-used\r\n")
		c.expect("USING u\r\n")
		c.send("list-tubes-watched\r\n")
		c.expect(okData("---\n- default\n- w\n"))
		c.send("ignore default\r\n")
		c.expect("WATCHING 1\r\n")
		c.send("list-tubes-watched\r\n")
		c.expect(okData("---\n- w\n"))
		c.send("ignore w\r\n")
		c.expect("NOT_IGNORED\r\n")
		// Ignoring a tube not watched changes nothing.
		c.send("ignore nope\r\n")
		c.expect("WATCHING 1\r\n")
		// Watching twice counts once.
		c.send("watch w\r\n")
		c.expect("WATCHING 1\r\n")
	})
}

// beanstalkd removes a tube from the watch list by moving the last one
// into its place.
func TestIgnoreOrder(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("watch a\r\nwatch b\r\nwatch c\r\nignore default\r\nlist-tubes-watched\r\n")
		c.expect("WATCHING 2\r\nWATCHING 3\r\nWATCHING 4\r\nWATCHING 3\r\n" + okData("---\n- c\n- a\n- b\n"))
	})
}

func TestPauseTube(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 0 0 0 1\r\nx\r\n")
		c.expect("INSERTED 1\r\n")
		start := time.Now()
		c.send("pause-tube default 1\r\n")
		c.expect("PAUSED\r\n")
		if m := c.statsTube("default"); m["pause"] != "1" || m["pause-time-left"] != "0" && m["pause-time-left"] != "1" || m["cmd-pause-tube"] != "1" {
			t.Errorf("%s: paused tube: %v", s.name, m)
		}
		// peek ignores the pause; reserve waits it out.
		c.send("peek-ready\r\nreserve\r\n")
		c.expect("FOUND 1 1\r\nx\r\nRESERVED 1 1\r\nx\r\n")
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("%s: reserved after %v from a tube paused for 1s", s.name, d)
		}
		if m := c.statsTube("default"); m["pause"] != "0" || m["pause-time-left"] != "0" {
			t.Errorf("%s: pause over: %v", s.name, m)
		}
		for _, bad := range []string{"pause-tube", "pause-tube default", "pause-tube default x", "pause-tube default 1 2",
			"pause-tube -x 1", "pause-tube default 4294967296", "pause-tube " + name200 + "x 1"} {
			c.send(bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		c.send("pause-tube nosuchtube 1\r\n")
		c.expect("NOT_FOUND\r\n")
	})
}

func TestUnpauseTube(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		a, b := s.dial(), s.dial()
		a.send("put 0 0 0 0\r\n\r\n")
		a.expect("INSERTED 1\r\n")
		a.send("pause-tube default 86400\r\n")
		a.expect("PAUSED\r\n")
		if m := a.statsTube("default"); m["pause"] != "86400" || !strings.HasPrefix(m["pause-time-left"], "8639") {
			t.Errorf("%s: paused for a day: %v", s.name, m)
		}
		b.send("reserve\r\n")
		b.nothing(200 * time.Millisecond)
		a.send("pause-tube default 0\r\n")
		a.expect("PAUSED\r\n")
		b.expect("RESERVED 1 0\r\n\r\n")
	})
}
