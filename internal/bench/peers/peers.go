// Package peers holds the benchmark targets that are not chronoq:
// beanstalkd, Redis (lmstfy's layout), NATS JetStream and RabbitMQ, each
// through its standard Go client, and Centrifugo (fanout only). Only cmd/chronoq-bench links it, so those
// clients never end up in the server binary.
package peers

import (
	"sync"

	"github.com/chronoq/chronoq/internal/bench"
)

var once sync.Once

// Register adds the peer targets to the bench; later calls do nothing.
func Register() { once.Do(register) }

func register() {
	bench.Register("beanstalkd", "127.0.0.1:11300", "beanstalkd (go-beanstalk)", bench.OpenBeanstalk)
	bench.Register("redis", "127.0.0.1:6379", "Redis with lmstfy's layout (go-redis)", openRedis)
	bench.Register("nats", "127.0.0.1:4222", "NATS JetStream work-queue stream (nats.go)", openNATS)
	bench.Register("rabbitmq", "127.0.0.1:5672", "RabbitMQ quorum queue (amqp091-go)", openRabbitMQ)
	bench.Register("centrifugo", "127.0.0.1:8000", "Centrifugo, fanout only (WebSocket JSON protocol via gorilla/websocket; HTTP API publish, key from --token)", openCentrifugo)
}
