package beanstalk

import (
	"strings"

	"github.com/chronoq/chronoq/internal/engine"
)

// Tube names allow "+/;$()" on top of the characters queue names allow, so
// a tube maps to a queue through a reversible escape: each of those
// characters becomes ".." and two hex digits, and so does every dot of a
// run of two or more (a lone dot stays), which keeps ".." free for escapes
// only. Common names ("emails", "app.jobs", "x_y", "a-b") map to
// themselves, so the same queue is reachable over HTTP by the same name.

const maxTubeName = 200 // beanstalkd's MAX_TUBE_NAME_LEN - 1

func tubeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-+/;.$_()", c) >= 0
}

// validTube is beanstalkd's rule for a tube name given alone.
func validTube(name string) bool {
	if len(name) == 0 || len(name) > maxTubeName || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !tubeChar(name[i]) {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789ABCDEF"

func escaped(c byte) bool { return strings.IndexByte("+/;$()", c) >= 0 }

// queueOf returns the queue name of a valid tube name; ok is false when
// the result is no queue name by the engine's rule (engine.ValidQueueName:
// an escaped name can outgrow its length).
func queueOf(tube string) (string, bool) {
	plain := true
	for i := 0; i < len(tube); i++ {
		if escaped(tube[i]) || tube[i] == '.' && (i+1 < len(tube) && tube[i+1] == '.' || i > 0 && tube[i-1] == '.' || tube == ".") {
			plain = false
			break
		}
	}
	if plain {
		return tube, engine.ValidQueueName(tube)
	}
	var b strings.Builder
	for i := 0; i < len(tube); i++ {
		c := tube[i]
		// The tube "." is escaped too: "." is no queue name (engine.ValidName).
		inRun := c == '.' && (i+1 < len(tube) && tube[i+1] == '.' || i > 0 && tube[i-1] == '.' || tube == ".")
		if escaped(c) || inRun {
			b.WriteString("..")
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
	q := b.String()
	return q, engine.ValidQueueName(q)
}

// tubeOf returns the tube name a queue is addressed by; ok is false for
// queues no tube name reaches (their names were made over HTTP and do not
// survive the round trip).
func tubeOf(queue string) (string, bool) {
	t := queue
	if strings.Contains(queue, "..") {
		t = unescape(queue)
	}
	if !validTube(t) {
		return "", false
	}
	if q, ok := queueOf(t); !ok || q != queue {
		return "", false
	}
	return t, true
}

func unescape(queue string) string {
	var b strings.Builder
	for i := 0; i < len(queue); i++ {
		if queue[i] == '.' && i+3 < len(queue) && queue[i+1] == '.' {
			if c, ok := unhex(queue[i+2], queue[i+3]); ok && (escaped(c) || c == '.') {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(queue[i])
	}
	return b.String()
}

func unhex(a, b byte) (byte, bool) {
	x, y := strings.IndexByte(hexDigits, a), strings.IndexByte(hexDigits, b)
	if x < 0 || y < 0 {
		return 0, false
	}
	return byte(x<<4 | y), true
}
