module github.com/chronoq/chronoq

go 1.26.8

require (
	github.com/oklog/ulid/v2 v2.1.2 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	golang.org/x/net v0.62.0 // indirect
)
