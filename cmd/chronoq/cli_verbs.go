package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/client"
)

// cliUsage lists the client verbs; main.go appends it to its own usage.
const cliUsage = `Client commands (talk to a running server):
  chronoq put QUEUE [PAYLOAD|@FILE|-]     put a job (JSON payload, else sent as bytes)
  chronoq take QUEUE...                   reserve jobs and print them with their receipts
  chronoq ack QUEUE ID RECEIPT            finish a reserved job
  chronoq nack QUEUE ID RECEIPT           give a reserved job back for a retry
  chronoq peek QUEUE ID                   show a job
  chronoq list QUEUE                      list a queue's jobs (filters: --state, --key, --tag)
  chronoq cancel QUEUE [ID]               delete one job, or the jobs matching a filter
  chronoq respawn QUEUE [ID...]           make dead jobs ready again
  chronoq stats [QUEUE...]                queues with their job counts
  chronoq queue create|get|pause|resume|purge|delete NAME
  chronoq ns create|list                  namespaces (admin listener)
  chronoq token create|revoke             namespace tokens (admin listener)
  chronoq cluster status|transfer-leader  a cluster member's view; hand leadership over (admin listener)

Every client command takes --url (CHRONOQ_URL, default http://127.0.0.1:7777),
--token (CHRONOQ_TOKEN), --ns (CHRONOQ_NS, default "default"), --admin-url
(CHRONOQ_ADMIN_URL, default http://127.0.0.1:7778) and --json for output
meant for scripts. "chronoq VERB --help" shows a verb's flags and an example.
`

// cliVerbs maps each client verb to its implementation; main.go dispatches
// os.Args[1] through it.
func cliVerbs() map[string]func(args []string) error {
	return map[string]func(args []string) error{
		"put":     cliPut,
		"take":    cliTake,
		"ack":     cliAck,
		"nack":    cliNack,
		"peek":    cliPeek,
		"list":    cliList,
		"cancel":  cliCancel,
		"respawn": cliRespawn,
		"stats":   cliStats,
		"queue":   cliQueue,
		"ns":      cliNamespace,
		"token":   cliToken,
		"cluster": cliCluster,
	}
}

// The verbs read and write through these so that tests can capture them.
var (
	cliOut io.Writer = os.Stdout
	cliErr io.Writer = os.Stderr
	cliIn  io.Reader = os.Stdin
)

const (
	cliDefaultURL      = "http://127.0.0.1:7777"
	cliDefaultAdminURL = client.DefaultAdminURL
)

// cliConn holds the connection flags every verb shares.
type cliConn struct {
	url, adminURL, token, ns, caFile string
	json                             bool
}

// cliCmd is one verb's flag set plus the text of its --help.
type cliCmd struct {
	fs       *flag.FlagSet
	conn     cliConn
	name     string
	synopsis string
	desc     string
	example  string
}

// answer prints a command's result: v as JSON with --json, else line.
func (c *cliCmd) answer(v any, line string) error {
	if c.conn.json {
		return cliJSON(v)
	}
	fmt.Fprintln(cliOut, line)
	return nil
}

func newCLICmd(name, synopsis, desc, example string) *cliCmd {
	c := &cliCmd{fs: flag.NewFlagSet(name, flag.ContinueOnError), name: name, synopsis: synopsis, desc: desc, example: example}
	c.fs.SetOutput(cliErr)
	// Defaults stay empty in the flag set and come from the environment
	// after parsing, so --help never prints a token from CHRONOQ_TOKEN.
	c.fs.StringVar(&c.conn.url, "url", "", "server URL (CHRONOQ_URL, default "+cliDefaultURL+")")
	c.fs.StringVar(&c.conn.adminURL, "admin-url", "", "admin listener URL (CHRONOQ_ADMIN_URL, default "+cliDefaultAdminURL+")")
	c.fs.StringVar(&c.conn.token, "token", "", "bearer token (CHRONOQ_TOKEN)")
	c.fs.StringVar(&c.conn.caFile, "ca-file", "", "PEM file of the CA that signed the server's certificate, for https:// URLs (CHRONOQ_CA_FILE)")
	c.fs.StringVar(&c.conn.ns, "ns", "", "namespace (CHRONOQ_NS, default \"default\")")
	c.fs.BoolVar(&c.conn.json, "json", false, "print JSON (the server's answer shape) instead of text")
	c.fs.Usage = func() { c.usage(c.fs.Output()) }
	return c
}

func (c *cliCmd) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: chronoq %s %s\n\n%s.\n\nExample:\n  %s\n\nFlags:\n", c.name, c.synopsis, c.desc, c.example)
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(cliErr)
}

// errCLIHelp is what parse returns after printing --help; verbs turn it
// into success via cliDone.
var errCLIHelp = errors.New("help shown")

func cliDone(err error) error {
	if errors.Is(err, errCLIHelp) {
		return nil
	}
	return err
}

// parse reads flags anywhere among the arguments (Go's flag package stops
// at the first positional one, but "chronoq put q '{}' --delay 1s" should
// work) and returns the positional arguments. Everything after "--" is
// positional, so a payload may start with a dash.
func (c *cliCmd) parse(args []string, minPos, maxPos int) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			c.usage(cliOut)
			return nil, errCLIHelp
		}
	}
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		rest := c.fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < minPos || (maxPos >= 0 && len(pos) > maxPos) {
		return nil, fmt.Errorf("usage: chronoq %s %s (see chronoq %s --help)", c.name, c.synopsis, c.name)
	}
	return pos, nil
}

func cliEnv(flagValue, env, def string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

func (c *cliCmd) client() *client.Client {
	return client.New(cliEnv(c.conn.url, "CHRONOQ_URL", cliDefaultURL),
		client.WithAdminURL(cliEnv(c.conn.adminURL, "CHRONOQ_ADMIN_URL", cliDefaultAdminURL)),
		client.WithToken(cliEnv(c.conn.token, "CHRONOQ_TOKEN", "")),
		client.WithNamespace(cliEnv(c.conn.ns, "CHRONOQ_NS", client.DefaultNamespace)),
		client.WithCAFile(cliEnv(c.conn.caFile, "CHRONOQ_CA_FILE", "")),
	)
}

// ---------------------------------------------------------------------------
// Flag values

// cliDuration is an optional duration flag: Go's form ("1h30m") or seconds
// ("1.5"), as the API reads them.
type cliDuration struct {
	v   time.Duration
	set bool
}

func (d *cliDuration) String() string {
	if !d.set {
		return ""
	}
	return d.v.String()
}

func (d *cliDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return fmt.Errorf("want a duration such as 30s, 1h30m or a number of seconds")
		}
		v = time.Duration(f * float64(time.Second))
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	d.v, d.set = v, true
	return nil
}

func (d *cliDuration) ptr() *time.Duration {
	if !d.set {
		return nil
	}
	v := d.v
	return &v
}

// cliTime is an optional RFC 3339 time flag.
type cliTime struct{ v time.Time }

func (t *cliTime) String() string {
	if t.v.IsZero() {
		return ""
	}
	return t.v.Format(time.RFC3339Nano)
}

func (t *cliTime) Set(s string) error {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time such as 2027-01-01T08:00:00Z")
	}
	t.v = v
	return nil
}

// cliUint is an optional unsigned flag; unset is distinct from 0 (priority
// 0 and tries 0 mean something).
type cliUint struct {
	v   uint64
	set bool
	max uint64
}

func (u *cliUint) String() string {
	if !u.set {
		return ""
	}
	return strconv.FormatUint(u.v, 10)
}

func (u *cliUint) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (u.max > 0 && v > u.max) {
		return fmt.Errorf("want a whole number from 0 to %d", u.maxOr())
	}
	u.v, u.set = v, true
	return nil
}

func (u *cliUint) maxOr() uint64 {
	if u.max == 0 {
		return 1<<64 - 1
	}
	return u.max
}

func (u *cliUint) u32() *uint32 {
	if !u.set {
		return nil
	}
	v := uint32(u.v)
	return &v
}

func (u *cliUint) u64() *uint64 {
	if !u.set {
		return nil
	}
	v := u.v
	return &v
}

func newUint32Flag() *cliUint { return &cliUint{max: 1<<32 - 1} }

// cliFloat is an optional float flag.
type cliFloat struct {
	v   float64
	set bool
}

func (f *cliFloat) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *cliFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("want a number")
	}
	f.v, f.set = v, true
	return nil
}

func (f *cliFloat) ptr() *float64 {
	if !f.set {
		return nil
	}
	v := f.v
	return &v
}

// cliTags collects repeated NAME=VALUE flags.
type cliTags map[string]string

func (t cliTags) String() string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + t[k]
	}
	return strings.Join(parts, ",")
}

func (t cliTags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want NAME=VALUE")
	}
	t[k] = v
	return nil
}

func (t cliTags) orNil() map[string]string {
	if len(t) == 0 {
		return nil
	}
	return t
}

// cliStates is a comma-separated and/or repeated --state flag.
type cliStates []string

func (s *cliStates) String() string { return strings.Join(*s, ",") }

func (s *cliStates) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Input

// cliReadArg reads a value given as text, as @FILE, or as - for stdin.
func cliReadArg(arg string) ([]byte, error) {
	switch {
	case arg == "-":
		b, err := io.ReadAll(cliIn)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return []byte(arg), nil
}

// cliPayload turns a payload argument into put options: JSON when it
// parses as JSON, else the bytes as they are (sent base64). binary forces
// bytes, for data that happens to look like JSON.
func cliPayload(arg string, binary bool) (json.RawMessage, []byte, error) {
	b, err := cliReadArg(arg)
	if err != nil {
		return nil, nil, err
	}
	if !binary {
		if t := bytes.TrimSpace(b); len(t) > 0 && json.Valid(t) {
			return json.RawMessage(t), nil, nil
		}
	}
	if b == nil {
		b = []byte{}
	}
	return nil, b, nil
}

// cliJSONArg reads a value that must be JSON (an ack result).
func cliJSONArg(name, arg string) (json.RawMessage, error) {
	b, err := cliReadArg(arg)
	if err != nil {
		return nil, err
	}
	t := bytes.TrimSpace(b)
	if !json.Valid(t) {
		return nil, fmt.Errorf("--%s: not valid JSON", name)
	}
	return json.RawMessage(t), nil
}
