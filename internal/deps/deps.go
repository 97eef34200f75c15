// Package deps pins modules that packages under construction will import,
// so go.mod stays tidy while they land.
package deps

import (
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/gorilla/websocket"
)
