// Package beanstalk serves beanstalkd's text protocol (1.13) over chronoq:
// a tube is a queue of one namespace, a job id is the job's sequence
// number, and every write is durable before its answer, committed in the
// broker's group commit with everything else in flight.
//
// What a client can see follows beanstalkd's prot.c, quirks included:
// command lines of at most 224 bytes cut the way beanstalkd cuts them,
// commands chosen by prefix, arguments read by its helpers (and by strtol
// and strtoul where it uses them), the order of checks that decides
// whether a put's body is read, DEADLINE_SOON one second before a
// reservation ends, reservations released when their connection closes,
// stats in 1.13's YAML. The conformance suite in test/beanstalk runs the
// same bytes against beanstalkd itself.
//
// Where chronoq's model differs, the protocol shows it:
//   - Ready jobs are served by (priority, time they became ready, id);
//     beanstalkd uses (priority, id). They differ only for jobs that were
//     delayed: those queue behind jobs that were ready before them. A
//     release without delay restores the job's id place, as in beanstalkd.
//   - Buried jobs are kept in id order, not in the order they were buried
//     (peek-buried, kick).
//   - Only stored jobs use up ids; beanstalkd also numbers puts it then
//     rejects (EXPECTED_CRLF, DRAINING).
//   - Tubes are queues, and queues last until deleted: a tube beanstalkd
//     would forget once empty and unused stays listed. list-tubes shows
//     "default", then the queues by age, then tubes only named by
//     connections.
//   - A reserve waiting on several tubes is served from the first of them
//     (in watch order) to get a job; only jobs arriving in several of its
//     tubes in the same commit could make that a less urgent one. A reserve
//     that finds ready jobs takes the most urgent across its tubes.
//   - Durations are capped where chronoq caps them (delays and pauses at
//     ten years, TTRs at 30 days); a tube whose escaped queue name would
//     exceed 200 bytes is BAD_FORMAT.
//   - stats-job's delay is the distance from the job's creation to its
//     activation (exact until a release with a delay); binlog-* counters
//     are 0, chronoq's log not being a binlog.
//   - Jobs put over HTTP can be in states beanstalkd lacks: dead is
//     buried, blocked (waiting on its key) is delayed, completed is gone.
//   - Jobs are at most 64 MiB (MaxJobSizeLimit); a larger -z is cut to
//     that with a warning, as beanstalkd cuts one above its 1 GiB. A tube
//     whose queue still has the default 1 MiB payload limit is raised to
//     -z when a larger job arrives; a limit set over HTTP is kept.
//   - stats-job's file is 0 when jobs are in no log that outlives the
//     process (Options.NoBinlog: chronoq beanstalkd without -b), as with
//     beanstalkd without a binlog; otherwise the log segment's number.
//   - Options.IdleTimeout (chronoq beanstalkd -I; off by default, as
//     beanstalkd has none) closes a connection silent that long outside a
//     reserve. Input pipelined behind a waiting reserve is read up to
//     1 MiB (maxPending); past it the server stops reading, which pushes
//     back on the client through TCP.
//   - Puts pipelined behind one another (already read when the one
//     before them is) are made durable together: up to 256 of them, 4 MiB
//     of bodies, are in flight at once per connection, numbered and
//     answered in the order sent; any other command waits for them.
//   - A line that looks like HTTP (starting with an upper-case HTTP
//     method and a space — "GET ", "POST ", "PUT ", "OPTIONS " … —, any
//     "METHOD target HTTP/1.x" request line, or a Host header) closes the
//     connection without an answer, where beanstalkd answers
//     UNKNOWN_COMMAND and reads on: a web
//     page can make a browser send an HTTP request to the port, and its
//     body would be run as commands (crossproto.go).
package beanstalk
