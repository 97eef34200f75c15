package peers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/bench"
	"github.com/chronoq/chronoq/internal/bench/peers"
)

// TestRegister: the peers become targets of the bench only through
// Register, which is what keeps them out of `chronoq bench`.
func TestRegister(t *testing.T) {
	has := func(name string) bool {
		for _, l := range bench.Targets() {
			if strings.HasPrefix(l, name+" ") {
				return true
			}
		}
		return false
	}
	for _, n := range []string{"beanstalkd", "redis", "nats", "rabbitmq"} {
		if has(n) {
			t.Fatalf("%s is a target before Register", n)
		}
	}
	cfg := bench.Config{Target: "nats", Scenario: "put", Conns: 1, Duration: 1}
	if _, err := bench.Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "unknown target") {
		t.Fatalf("nats before Register: %v", err)
	}
	peers.Register()
	for _, n := range []string{"chronoq-http", "chronoq-ws", "chronoq-beanstalk", "beanstalkd", "redis", "nats", "rabbitmq"} {
		if !has(n) {
			t.Errorf("%s missing after Register: %v", n, bench.Targets())
		}
	}
}
