package ws

// disconnectReason is why the server ends a connection. The code is the
// WebSocket close code (and the code of the {"disconnect"} push, which SSE
// clients get as an event). Codes 4000–4499 mean "reconnect" (with
// recovery), 4500–4999 mean "do not reconnect without changing something",
// so a client needs no table of reasons to do the right thing.
type disconnectReason struct {
	Code      int    `json:"code"`
	Reason    string `json:"reason"`
	Reconnect bool   `json:"reconnect"`
}

var (
	discShutdown       = disconnectReason{4001, "shutdown", true}
	discSlow           = disconnectReason{4002, "slow_consumer", true}
	discExpired        = disconnectReason{4003, "token_expired", true}
	discAdminReconnect = disconnectReason{4004, "disconnected", true}
	discConnectTimeout = disconnectReason{4005, "connect_timeout", true}
	discBadRequest     = disconnectReason{4500, "bad_request", false}
	discUnauthorized   = disconnectReason{4501, "unauthorized", false}
	discAdmin          = disconnectReason{4502, "disconnected", false}
	discRevoked        = disconnectReason{4503, "token_revoked", false}
)
