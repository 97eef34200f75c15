package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

var fuzzLimits = limits{maxPayload: 1 << 10, maxWait: time.Minute}

var putSeeds = []string{
	``, `{}`, `null`, `[]`, `{"payload":null}`, `{"payload":{"a":[1,2,{"b":"\u00e9"}]}}`,
	`{"payload_base64":"AAEC/w=="}`, `{"payload":1,"payload_base64":"AA=="}`,
	`{"payload":1,"delay":1.5,"ttl":"1h","ttr":"30s","tries":5,"priority":10}`,
	`{"payload":1,"delay":"1s","at":"2027-01-01T00:00:00Z"}`,
	`{"payload":1,"tags":{"a":"b"},"key":"k","id":"x:y","reply_to":"q","cron":"@hourly","idempotency_key":"i"}`,
	`{"payload":1,"priority":1e400}`, `{"payload":1,"delay":-0}`, `{"payload":1,"tags":{"a":1}}`,
	`{"payload":1,"foo":1}`, `{"payload":"` + "\xff\xfe" + `"}`, `{"payload":1}garbage`,
}

// checkDecodeError insists that decoding fails only with the two codes a
// body can cause, so no input can turn into a 500.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var ee *engine.Error
	if !errors.As(err, &ee) {
		t.Fatalf("decode error %T %v is not an engine error", err, err)
	}
	if ee.Code != engine.CodeBadRequest && ee.Code != engine.CodePayloadTooLarge {
		t.Fatalf("decode error with code %q: %v", ee.Code, err)
	}
}

func checkStoredJSON(t *testing.T, what string, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("%s %q is not valid JSON", what, data)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, data); err != nil || !bytes.Equal(c.Bytes(), data) {
		t.Fatalf("%s %q is not compact", what, data)
	}
}

func checkPut(t *testing.T, req engine.PutRequest) {
	t.Helper()
	if req.PayloadJSON {
		checkStoredJSON(t, "payload", req.Payload)
	}
	if int64(len(req.Payload)) > fuzzLimits.maxPayload {
		t.Fatalf("payload of %d bytes accepted", len(req.Payload))
	}
	if req.Delay != nil && (*req.Delay < 0 || *req.Delay > engine.MaxDelay) {
		t.Fatalf("delay %v accepted", *req.Delay)
	}
	if req.Delay != nil && req.At != nil {
		t.Fatal("delay and at both accepted")
	}
	for _, d := range []*time.Duration{req.TTL, req.TTR} {
		if d != nil && *d < 0 {
			t.Fatalf("negative duration %v accepted", *d)
		}
	}
	if len(req.Tags) > engine.MaxTags || len(req.Key) > engine.MaxKeyLen {
		t.Fatalf("limits not enforced: %d tags, key of %d bytes", len(req.Tags), len(req.Key))
	}
}

func FuzzDecodePut(f *testing.F) {
	for _, s := range putSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodePut(body, fuzzLimits)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		checkPut(t, req)
	})
}

func FuzzDecodeAck(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"receipt":"r"}`, `{"result":null}`, `{"result":{ "a" : 1 }}`,
		`{"next":{"queue":"q2","payload":1,"delay":"1s"}}`, `{"next":{"payload":1,"delay":true}}`,
		`{"next":null}`, `{"next":[]}`, `{"reschedule":{"delay":"1h"}}`, `{"reschedule":{"at":"2027-01-01T00:00:00Z"}}`,
		`{"reschedule":{"delay":"1s","at":"2027-01-01T00:00:00Z"}}`, `{"reschedule":5}`, `{"x":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeAck(body, "q", fuzzLimits)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if req.HasResult {
			checkStoredJSON(t, "result", req.Result)
		}
		if req.Next != nil {
			if !engine.ValidQueueName(req.Next.Queue) {
				t.Fatalf("next queue %q accepted", req.Next.Queue)
			}
			checkPut(t, req.Next.Put)
		}
		if rs := req.Reschedule; rs != nil && rs.Delay != nil && rs.At != nil {
			t.Fatal("reschedule with delay and at accepted")
		}
	})
}

// TestDecodersTotal runs every decoder over the seeds of both fuzz targets
// and some hostile shapes, so that a plain `go test` covers what the fuzzers
// start from.
func TestDecodersTotal(t *testing.T) {
	inputs := append([]string{}, putSeeds...)
	inputs = append(inputs, `{"jobs":[{"payload":1},null,{"payload":1,"ttl":[]}]}`, `{"queues":[null]}`,
		`{"backoff":null}`, `{"backoff":{"jitter":1e999}}`, `{"ids":[1]}`, `{"limit":1e30}`,
		`{"data":{}}`, `{"name":"n","auto_create_queues":null}`, "\x00", `{"a":`, `"\ud800"`)
	for _, in := range inputs {
		b := []byte(in)
		errs := []error{}
		_, err := decodePut(b, fuzzLimits)
		errs = append(errs, err)
		_, err = decodeBatch(b, fuzzLimits)
		errs = append(errs, err)
		_, _, err = decodeCall(b, fuzzLimits)
		errs = append(errs, err)
		_, err = decodeAck(b, "q", fuzzLimits)
		errs = append(errs, err)
		_, err = decodeNack(b)
		errs = append(errs, err)
		_, err = decodeTouch(b)
		errs = append(errs, err)
		_, err = decodeBury(b)
		errs = append(errs, err)
		_, _, err = decodeTake(b, true, fuzzLimits)
		errs = append(errs, err)
		_, err = decodeUpdate(b, fuzzLimits)
		errs = append(errs, err)
		_, err = decodeRespawn(b)
		errs = append(errs, err)
		_, err = decodeQueuePatch(b, fuzzLimits)
		errs = append(errs, err)
		_, err = decodePublish(b, fuzzLimits)
		errs = append(errs, err)
		_, _, err = decodeNamespace(b)
		errs = append(errs, err)
		_, err = decodeToken(b)
		errs = append(errs, err)
		errs = append(errs, decodeEmpty(b))
		for _, err := range errs {
			if err != nil {
				checkDecodeError(t, err)
			}
		}
	}
}
