// Command chronoq is the chronoq server and its command-line tools.
package main

import (
	"fmt"
	"os"

	_ "time/tzdata" // cron specs may name any CRON_TZ zone, also on hosts without zoneinfo
)

const usage = `chronoq — a durable queue server

Usage:
  chronoq serve [flags]          run the server (see: chronoq serve --help)
  chronoq wal verify DIR         check every record of a data directory's log
  chronoq wal dump DIR           print the log's records, one per line
  chronoq backup DIR             online backup of a running server (see: chronoq backup --help)
  chronoq restore BACKUP DATA    verify a backup and lay it out as a data directory
  chronoq beanstalkd [flags]     a drop-in for the beanstalkd binary (see: chronoq beanstalkd -h)
  chronoq bench [flags]          load-test a running chronoq (peers and plots: cmd/chronoq-bench)
  chronoq help                   this text

Every serve flag can also be set as CHRONOQ_<NAME> in the environment
(e.g. CHRONOQ_SYNC=interval) or as "name = value" in a file given by --config.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage+"\n"+cliUsage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "wal":
		err = walCmd(os.Args[2:])
	case "backup":
		err = cliBackup(os.Args[2:])
	case "restore":
		err = restoreCmd(os.Args[2:])
	case "beanstalkd":
		err = beanstalkdCmd(os.Args[2:])
	case "bench":
		err = benchCmd(os.Args[2:])
	case "help", "-h", "--help":
		fmt.Print(usage + "\n" + cliUsage)
		return
	default:
		verb, ok := cliVerbs()[os.Args[1]]
		if !ok {
			fmt.Fprintf(os.Stderr, "chronoq: unknown command %q\n\n%s\n%s", os.Args[1], usage, cliUsage)
			os.Exit(2)
		}
		err = verb(os.Args[2:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chronoq:", err)
		os.Exit(1)
	}
}
