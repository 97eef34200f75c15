package ws

import (
	"encoding/json"
	"errors"
	"testing"
)

// decodeAll runs a frame through everything a connection does to decode a
// command before acting on it.
func decodeAll(frame []byte) error {
	cmd, err := decodeCommand(frame)
	if err != nil {
		return err
	}
	var body any
	switch cmd.Op {
	case "connect":
		body = &connectBody{}
	case "subscribe":
		body = &subscribeBody{}
	case "unsubscribe":
		body = &channelBody{}
	case "publish":
		var b publishBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			return err
		}
		_, err := compactJSON("data", b.Data, 1<<10)
		return err
	case "refresh":
		body = &refreshBody{}
	case "consume":
		body = &consumeBody{}
	case "stop":
		body = &struct{}{}
	case "ack":
		body = &ackBody{}
	case "nack":
		body = &nackBody{}
	case "touch":
		body = &touchBody{}
	case "bury":
		body = &buryBody{}
	case "put":
		var b putBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			return err
		}
		_, err := b.request(1 << 10)
		return err
	default:
		panic("decodeCommand let an unknown op through: " + cmd.Op)
	}
	return decodeBody(cmd.Body, body)
}

func FuzzDecodeCommand(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"connect":{"token":"abc"}}`,
		`{"id":2,"subscribe":{"channel":"ns/ch","since":5,"epoch":"e"}}`,
		`{"id":3,"publish":{"channel":"ch","data":{"a":[1,2,null]}}}`,
		`{"id":4,"consume":{"queues":["a","b"],"prefetch":10,"ttr":"30s"}}`,
		`{"id":5,"ack":{"queue":"q","id":"x","receipt":"r","result":1}}`,
		`{"id":6,"nack":{"queue":"q","id":"x","receipt":"r","delay":1.5}}`,
		`{"id":7,"put":{"queue":"q","payload_base64":"AAEC","delay":"1h","tags":{"a":"b"}}}`,
		`{"id":8,"put":{"queue":"q","payload":null,"at":"2030-01-01T00:00:00Z","tries":3}}`,
		`{"id":9,"stop":null}`,
		`{"id":9007199254740992,"stop":{}}`,
		`{"id":1,"touch":{"ttr":-1}}`,
		`{"id":1}`, `[]`, `{`, `{"id":1,"a":{},"b":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		err := decodeAll(frame)
		if err == nil {
			if !json.Valid(frame) {
				t.Fatalf("accepted invalid JSON %q", frame)
			}
			return
		}
		var ce *cmdError
		if !errors.As(err, &ce) || ce.Code == "" || ce.Message == "" {
			t.Fatalf("error %v (%T) is not a client error with a code and message", err, err)
		}
		cmd, _ := decodeCommand(frame)
		if cmd.ID > maxID {
			t.Fatalf("id %d over 2^53-1 accepted", cmd.ID)
		}
	})
}

func TestDecodeCommand(t *testing.T) {
	for frame, ok := range map[string]bool{
		`{"id":1,"stop":{}}`:                true,
		` {"id":1,"stop":{}} `:              true,
		`{"id":0,"stop":{}}`:                false,
		`{"id":-1,"stop":{}}`:               false,
		`{"id":1.5,"stop":{}}`:              false,
		`{"id":"1","stop":{}}`:              false,
		`{"id":9007199254740992,"stop":{}}`: false,
		`{"id":1}`:                          false,
		`{"id":1,"stop":{},"ack":{}}`:       false,
		`{"id":1,"bogus":{}}`:               false,
		`{"id":1,"stop":{"x":1}}`:           false,
		`{"id":1,"put":{"queue":"q"}}`:      false,
		`{"id":1,"put":{"queue":"q","payload":1,"payload_base64":"AA=="}}`:                  false,
		`{"id":1,"put":{"queue":"q","payload":1,"delay":"1s","at":"2030-01-01T00:00:00Z"}}`: false,
		`{"id":1,"put":{"queue":"q","payload":1,"delay":"-1s"}}`:                            false,
		`{"id":1,"put":{"queue":"q","payload":"` + string(make([]byte, 0)) + `x"}}`:         true,
		`{"id":1,"nack":{"delay":"xyz"}}`:                                                   false,
		`{"id":1,"subscribe":{"since":"3"}}`:                                                false,
	} {
		err := decodeAll([]byte(frame))
		if (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", frame, err, ok)
		}
	}
}

func TestAppendFrameLengths(t *testing.T) {
	for _, n := range []int{0, 125, 126, 65535, 65536} {
		f := appendFrame(nil, 1, make([]byte, n))
		hdr := len(f) - n
		want := 2
		if n > 125 {
			want = 4
		}
		if n > 65535 {
			want = 10
		}
		if hdr != want || f[0] != 0x81 {
			t.Errorf("payload %d: header %d bytes (first %#x), want %d", n, hdr, f[0], want)
		}
	}
}
