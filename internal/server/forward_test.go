package server

import "testing"

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"error":{"code":"not_leader","message":"this node is not the leader; the leader is node 2"}}`, "not_leader"},
		{`{"error":{"code":"no_quorum","message":"x"}}`, "no_quorum"},
		{`{"error":"service unavailable: this node is not the leader; the leader is node 3"}`, "not_leader"},
		{`{"error":"service unavailable: no leader is known: this node cannot reach a quorum"}`, "no_quorum"},
		{`{"error":"service unavailable: server is shutting down"}`, ""},
		{`{"error":{"code":"unknown_outcome"}}`, "unknown_outcome"},
		{`not json`, ""},
	} {
		if got := errorCode([]byte(tc.body)); got != tc.want {
			t.Errorf("errorCode(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}
